"""
Triton, PyTorch and CUDA; the memory hierarchy
==============================================

PyTorch gives you whole-tensor operations and picks the kernels; CUDA gives you one
thread and everything else to arrange yourself; Triton sits between: you write what one
*program* does to a block of data, and the compiler arranges the threads. What you still
control in Triton is the thing that sets the speed of most kernels: how many bytes cross
between GPU memory and the chip.

You will learn:

* one operation written three ways, and what each level decides for you;
* the memory hierarchy (registers and shared memory on each SM, the L2 cache, HBM) and,
  on a GPU, the bandwidth of each level measured against working-set size;
* arithmetic intensity and the roofline, with this project's kernels placed on it;
* how many more bytes a chain of PyTorch operations moves than one fused kernel.
"""

# %%
# Where this page ran
# -------------------

import matplotlib.pyplot as plt
import torch
import triton

from triton_guide import (
    attention,
    matmul,
    runtime,
    softmax,
    softmax_naive,
    vector_add,
)
from triton_guide.benchmark import gb_per_s, median_ms, plot, sweep, tflop_per_s
from triton_guide.traffic import (
    READ_BLOCK,
    attention_cost,
    count_bytes,
    matmul_cost,
    read_working_set,
    softmax_cost,
    vector_add_cost,
)

print(runtime.describe())
device = runtime.device()
torch.manual_seed(0)

# %%
# One operation, three ways
# -------------------------
# Adding two vectors. In **PyTorch** it is ``x + y``: one call, and PyTorch chooses a
# prebuilt kernel, its launch configuration and its memory access. In **Triton** it is
# the kernel of the first page, written for one program that handles ``BLOCK_SIZE``
# elements:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add_kernel
#
# In **CUDA** the kernel is written for one *thread* and one element, and the rest is
# yours: the number of threads per block, the number of blocks, building the code, and
# (for anything larger than this) staging data through shared memory, vectorising loads
# and synchronising threads. This CUDA source is shown, not run on this page:
#
# .. code-block:: cuda
#
#    __global__ void vector_add(const float* x, const float* y, float* out, int n) {
#        int i = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's element
#        if (i < n) {                                     // the mask, one lane each
#            out[i] = x[i] + y[i];
#        }
#    }
#
#    // Host side: choose the block shape, launch, check for launch errors.
#    void launch(const float* x, const float* y, float* out, int n) {
#        int threads = 256;                          // threads per block: your choice
#        int blocks = (n + threads - 1) / threads;   // the same cdiv as in Triton
#        vector_add<<<blocks, threads>>>(x, y, out, n);
#        cudaError_t status = cudaGetLastError();
#        if (status != cudaSuccess) { /* report it */ }
#    }
#
# To call it from PyTorch it must also be compiled (``nvcc``, or
# ``torch.utils.cpp_extension.load_inline``) and bound to Python. Counting the units of
# work each level launches for the same vector:

n = runtime.pick(interpreter=98_765, gpu=98_765_431)
x = torch.randn(n, device=device)
y = torch.randn(n, device=device)
same = torch.equal(vector_add(x, y), x + y)
print(f"n = {n:,}: Triton's vector_add equals torch's x + y bit for bit: {same}")
print(f"Triton: {triton.cdiv(n, 1024):,} programs of 1024 elements")
print(f"CUDA:   {triton.cdiv(n, 256):,} blocks of 256 threads, "
      f"{triton.cdiv(n, 256) * 256:,} threads of one element each")

# %%
# The memory hierarchy
# --------------------
# Data lives in four places, each smaller and faster than the last:
#
# * **HBM**, the GPU's main memory (tens of gigabytes): every tensor starts and ends
#   here.
# * **L2 cache**, shared by the whole chip (tens of megabytes): recently touched data.
# * **Shared memory / L1**, one per streaming multiprocessor (SM), a few hundred KB:
#   where Triton stages the blocks a program works on (your job in CUDA).
# * **Registers**, per thread: the values a program is computing with.
#
# A kernel's blocks are loaded from HBM (through L2) into the SM, computed on, and
# stored back. Arithmetic on the chip is so fast that, for most kernels, the time is the
# time to move the bytes. The sizes of this GPU, read from the device:

if runtime.interpreting():
    print("no GPU here: the sizes are read from the device when the page runs on one")
else:
    properties = torch.cuda.get_device_properties(0)
    l2_bytes = properties.L2_cache_size
    hbm_gib = properties.total_memory / 2**30
    print(f"{properties.name}: {properties.multi_processor_count} SMs, "
          f"L2 {l2_bytes / 2**20:.0f} MiB, HBM {hbm_gib:.0f} GiB")
    shared = getattr(properties, "shared_memory_per_multiprocessor", None)
    if shared:
        print(f"shared memory per SM: {shared / 2**10:.0f} KiB")

# %%
# Bandwidth against working-set size
# ----------------------------------
# To see the levels, read a working set of a chosen size many times in one launch: the
# package's ``read_working_set_kernel`` has program ``p`` read block ``p % num_blocks``,
# so the programs sweep the working set pass after pass. When it fits in L2, every pass
# after the first is served from L2; when it does not, each pass comes from HBM again.
#
# .. literalinclude:: /../triton_guide/traffic.py
#    :pyobject: read_working_set_kernel

working_sets = [2**k for k in range(18, 32)]  # bytes: 256 KiB to 2 GiB


def reader(size_bytes):
    data = torch.randn(size_bytes // 4, device=device)
    passes = max(2, 2**32 // size_bytes)  # about 4 GB read per launch
    return lambda: read_working_set(data, passes)


def read_rate(size_bytes, ms):
    return gb_per_s(size_bytes * max(2, 2**32 // size_bytes), ms)


levels = sweep(working_sets, {"read": reader}, read_rate, label="bytes")
if levels is not None:
    figure = plot([s / 2**20 for s in working_sets], levels, xlabel="working set (MiB)",
                  ylabel="GB/s", title="read bandwidth against working-set size")
    figure.axes[0].axvline(l2_bytes / 2**20, color="gray", linestyle="--")
    figure.axes[0].text(l2_bytes / 2**20, 0, " L2 size", color="gray")
    rates = levels["read"]
    in_l2 = max(r for s, r in zip(working_sets, rates) if s <= l2_bytes // 2)
    in_hbm = rates[-1]
    print(f"working set <= L2/2: up to {in_l2:,.0f} GB/s; 2 GiB (HBM): "
          f"{in_hbm:,.0f} GB/s; L2 is {in_l2 / in_hbm:.1f}x faster")
else:
    print(f"(each program reads {READ_BLOCK} float32 = {READ_BLOCK * 4 // 1024} KiB)")

# %%
# Arithmetic intensity and the roofline
# -------------------------------------
# A kernel's **arithmetic intensity** is its FLOPs divided by the bytes it must move.
# A GPU can do at most ``peak FLOP/s`` and move at most ``bandwidth`` bytes/s, so a
# kernel of intensity ``I`` runs at most at ``min(peak, I x bandwidth)``: that line is
# the *roofline*. Below the **ridge point** ``peak / bandwidth`` a kernel is memory
# bound; above it, compute bound. This project's kernels, at the sizes of their pages'
# benchmarks:

kernels = {
    "vector_add fp32, n=2^26": vector_add_cost(2**26),
    "softmax fp32, 4096x4096": softmax_cost(4096, 4096),
    "matmul fp16, 4096^3": matmul_cost(4096, 4096, 4096),
    "attention fp16, 4x16x4096x64": attention_cost(4, 16, 4096, 64),
}
for name, cost in kernels.items():
    print(f"{name:<30} {cost.flops / 1e9:10.2f} GFLOP {cost.bytes / 1e6:9.1f} MB "
          f"{cost.intensity:9.2f} FLOP/byte")

# %%
# The ceilings are measured in the same run: the copy bandwidth of a 1 GiB tensor (read
# once, written once) and the FLOP rate of a large bfloat16 matrix product by cuBLAS.
# Then each kernel is timed and placed at its intensity and achieved rate.


def run_kernel(name):
    if name.startswith("vector_add"):
        a, b = torch.randn(2, 2**26, device=device).unbind(0)
        return lambda: vector_add(a, b)
    if name.startswith("softmax"):
        rows = torch.randn(4096, 4096, device=device)
        return lambda: softmax(rows)
    if name.startswith("matmul"):
        a, b = torch.randn(2, 4096, 4096, device=device, dtype=torch.float16).unbind(0)
        return lambda: matmul(a, b)
    q, k, v = torch.randn(3, 4, 16, 4096, 64, device=device,
                          dtype=torch.float16).unbind(0)
    return lambda: attention(q, k, v)


figure, axes = plt.subplots(figsize=(7, 4.2))
intensities = [cost.intensity for cost in kernels.values()]
if runtime.timings_meaningful():
    source = torch.empty(2**28, device=device)
    target = torch.empty_like(source)
    copy_ms = median_ms(lambda: target.copy_(source))
    bandwidth = gb_per_s(2 * source.numel() * 4, copy_ms)
    del source, target
    big = torch.randn(2, 8192, 8192, device=device, dtype=torch.bfloat16).unbind(0)
    peak = tflop_per_s(2 * 8192**3, median_ms(lambda: big[0] @ big[1]))
    del big
    ridge = peak * 1e3 / bandwidth
    print(f"ceilings: copy {bandwidth:,.0f} GB/s, bf16 GEMM {peak:,.0f} TFLOP/s; "
          f"ridge point {ridge:.0f} FLOP/byte")
    grid_x = [2.0**e for e in range(-5, 12)]
    axes.plot(grid_x, [min(peak, i * bandwidth / 1e3) for i in grid_x], color="black",
              label="roofline (measured ceilings)")
    for name, cost in kernels.items():
        achieved = tflop_per_s(cost.flops, median_ms(run_kernel(name)))
        roof = min(peak, cost.intensity * bandwidth / 1e3)
        axes.plot(cost.intensity, achieved, marker="o", linestyle="", label=name)
        print(f"{name:<30} {achieved:8.2f} TFLOP/s, {achieved / roof:5.0%} of its roof")
    axes.set_yscale("log")
    axes.set_ylabel("TFLOP/s")
else:
    for name, cost in kernels.items():
        axes.axvline(cost.intensity, linestyle="--", label=name)
    axes.set_yticks([])
    axes.set_ylabel("(ceilings and rates need a GPU)")
axes.set_xscale("log", base=2)
axes.set_xlabel("arithmetic intensity (FLOP/byte)")
axes.legend(fontsize=8)
axes.grid(True, alpha=0.3)
axes.set_title(f"roofline\n{runtime.describe()}", fontsize=10)
figure.tight_layout()
print(f"intensities span {max(intensities) / min(intensities):,.0f}x, from "
      f"{min(intensities):.3f} to {max(intensities):,.0f} FLOP/byte")

# %%
# Fusion: bytes moved by a chain against one kernel
# -------------------------------------------------
# Written as PyTorch operations, softmax is five kernels, each reading its inputs from
# HBM and writing its output back (the softmax page explains the kernel). Counting the
# bytes each operation really reads and writes, with a ``TorchDispatchMode`` that sees
# every operation PyTorch runs:

rows, cols = runtime.pick(interpreter=(256, 1024), gpu=(4096, 4096))
data = torch.randn(rows, cols, device=device)
chain = count_bytes(lambda: softmax_naive(data))
for op_name, read, written in chain:
    print(f"  {op_name:<18} read {read / 1e6:7.2f} MB, write {written / 1e6:7.2f} MB")
chain_bytes = sum(read + written for _, read, written in chain)
fused_bytes = softmax_cost(rows, cols).bytes
print(f"{rows} x {cols} float32: the chain moves {chain_bytes / 1e6:.1f} MB in "
      f"{len(chain)} kernels; the fused kernel {fused_bytes / 1e6:.1f} MB in one: "
      f"{chain_bytes / fused_bytes:.2f}x the bytes")

# %%
# On a GPU the times follow the bytes:

if runtime.timings_meaningful():
    chain_ms = median_ms(lambda: softmax_naive(data))
    fused_ms = median_ms(lambda: softmax(data))
    chain_rate = gb_per_s(chain_bytes, chain_ms)
    fused_rate = gb_per_s(fused_bytes, fused_ms)
    print(f"chain {chain_ms * 1e3:.0f} us ({chain_rate:,.0f} GB/s moved), fused "
          f"{fused_ms * 1e3:.0f} us ({fused_rate:,.0f} GB/s moved): fused is "
          f"{chain_ms / fused_ms:.2f}x faster")
else:
    print("(timings need a GPU)")

# %%
# Takeaways
# ---------
# * PyTorch chooses kernels for whole tensors; CUDA leaves every thread to you; Triton
#   has you write one program over a block and handles the threads and shared memory.
# * HBM is large and slow, L2 smaller and faster, shared memory and registers tiny and
#   fastest: a kernel is fast when its bytes come from high in that list, or are few.
# * Below the ridge point (element-wise ops, softmax) time is bytes over bandwidth;
#   matrix products and attention have enough FLOPs per byte to be compute bound.
# * Fusing a chain of operations into one kernel divides the bytes moved, and the time.
#
# Used here: :func:`triton_guide.vector_add`, :func:`triton_guide.softmax`,
# :func:`triton_guide.softmax_naive`, :func:`triton_guide.matmul`,
# :func:`triton_guide.attention`, :func:`triton_guide.traffic.count_bytes`,
# :func:`triton_guide.traffic.read_working_set`,
# :func:`triton_guide.benchmark.median_ms`, :func:`triton_guide.benchmark.sweep`.
