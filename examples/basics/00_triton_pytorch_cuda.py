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
* the memory hierarchy (registers and shared memory on each SM, the L2 cache, HBM), and
  the read bandwidth of L2 and of HBM, measured on GPUs against working-set size;
* arithmetic intensity and the roofline, with this project's kernels placed on it;
* how many more bytes a chain of PyTorch operations moves than one fused kernel.
"""

# %%
import torch
import triton
from triton.backends.nvidia.compiler import CUDAOptions  # Triton's defaults

from triton_guide import attention, matmul, runtime, softmax, softmax_naive, vector_add
from triton_guide.benchmark import (Benchmark, measure_device_sizes, place_on_roofline,
                                    sweep_working_sets)
from triton_guide.traffic import (READ_BLOCK, attention_cost, count_bytes, matmul_cost,
                                  read_working_set, softmax_cost, vector_add_cost)

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()

# %%
# One operation, three ways
# -------------------------
# Adding two vectors. In **PyTorch** it is ``x + y``: one call, and PyTorch chooses a
# prebuilt kernel, its launch configuration and its memory access. In **Triton** it is
# the kernel of the :ref:`next page <sphx_glr_auto_examples_basics_01_vector_add.py>`
# (which takes it line by line), written for one program that handles ``BLOCK_SIZE``
# elements:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add_kernel
#
# In **CUDA** the kernel is written for one *thread* and one element, and the rest is
# yours: the number of threads per thread block, the number of thread blocks, building
# the code, and (for anything larger than this) staging data through shared memory,
# vectorising loads and synchronising threads. This CUDA source is shown, not run on
# this page:
#
# .. code-block:: cuda
#
#    __global__ void vector_add(const float* x, const float* y, float* out, int n) {
#        int i = blockIdx.x * blockDim.x + threadIdx.x;  // this thread's element
#        if (i < n) {                                     // the mask, one element each
#            out[i] = x[i] + y[i];
#        }
#    }
#
#    // Host side: choose the block shape, launch, check for launch errors.
#    void launch(const float* x, const float* y, float* out, int n) {
#        int threads = 256;                          // threads per thread block
#        int blocks = (n + threads - 1) / threads;   // the same cdiv as in Triton
#        vector_add<<<blocks, threads>>>(x, y, out, n);
#        cudaError_t status = cudaGetLastError();
#        if (status != cudaSuccess) { /* report it */ }
#    }
#
# To call it from PyTorch it must also be compiled (``nvcc``, or
# ``torch.utils.cpp_extension.load_inline``) and bound to Python. Counting the units of
# work each level launches for the same vector: a Triton program is not a thread. As the
# :ref:`vector-add page <sphx_glr_auto_examples_basics_01_vector_add.py>` explains, each
# program runs as one CUDA thread block of ``num_warps`` warps (a warp is a group of 32
# threads that execute together), and each thread handles several *lanes*, element
# positions, of the program's block. ``vector_add`` launches with ``BLOCK_SIZE = 1024``
# elements per program, the 1024 below.

n = runtime.pick(interpreter=98_765, gpu=98_765_431)
x = torch.randn(n, device=device)
y = torch.randn(n, device=device)
same = torch.equal(vector_add(x, y), x + y)
print(f"n = {n:,}: Triton's vector_add equals torch's x + y bit for bit: {same}")
num_warps = CUDAOptions.num_warps  # Triton's default: vector_add does not pass num_warps
programs = triton.cdiv(n, 1024)
print(f"Triton: {programs:,} programs of 1024 elements, each one thread block of "
      f"{num_warps} x 32 = {num_warps * 32} threads: {programs * num_warps * 32:,} threads "
      f"of {1024 // (num_warps * 32)} elements each")
print(f"CUDA:   {triton.cdiv(n, 256):,} thread blocks of 256 threads, "
      f"{triton.cdiv(n, 256) * 256:,} threads of one element each")

# %%
# The memory hierarchy
# --------------------
# Data lives in four places, each smaller and faster than the last:
#
# * **HBM**, the GPU's main memory (tens to hundreds of gigabytes; this page prints its
#   GPUs' below): every tensor starts and ends here.
# * **L2 cache**, shared by the whole chip (tens of megabytes): recently touched data.
# * **Shared memory / L1**, one per streaming multiprocessor (SM): one on-chip memory
#   split between the L1 cache and shared memory (256 KiB per SM on the H100, per
#   NVIDIA's H100 Tensor Core GPU Architecture whitepaper; the most of it that can be
#   shared memory, in KiB, is printed below). Shared memory is a scratchpad that the
#   threads of one thread block (one Triton program) share. In CUDA you decide what goes
#   there; in Triton the compiler does. The blocks of an element-wise kernel or of a softmax row stay in
#   registers. Triton uses shared memory for the tiles of a matrix product (``tl.dot``,
#   the block-times-block product), for tiles loaded ahead of the step that uses them
#   (so loading and computing overlap), and for values that must pass between the warps
#   of a program (a warp is a group of 32 threads), as in a sum over a whole block. The
#   :ref:`matmul page <sphx_glr_auto_examples_core_kernels_01_matmul.py>` shows the first
#   two at work.
# * **Registers**, per thread: the values a program is computing with.
#
# A kernel's blocks are loaded from HBM (through L2) into the SM, computed on, and
# stored back. Arithmetic on the chip is so fast that, for most kernels, the time is the
# time to move the bytes. The sizes of each GPU, read from the device
# (``torch.cuda.get_device_properties``) when the page ran on it and recorded with its
# timings:

sizes = measure_device_sizes(bench)  # GPU -> {"SMs": ..., "L2 cache (MiB)": ...}

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
#
# Each launch reads the same number of bytes, whatever the size of the working set
# (printed below). On the plot, the wide pale line is a plain device-to-device copy of
# 1 GiB, measured in the same run: the reference for a kernel that streams from HBM. A copy
# reads and writes, and HBM turns around between the two, so a kernel that only reads
# can pass that line (the lines after the plot say by how much on each GPU). A dashed
# line marks each GPU's L2. The smallest working sets run faster still. The likely cause
# is each SM's own L1 cache, one level above L2, holding part of the set; this page does
# not measure L1, so take that as a hypothesis. The lines after the plot quote the L2
# rate as the median of the sizes from 4 MiB to half of L2. That range is this page's
# choice: it leaves out the smallest sets, and keeps well clear of the drop near the
# size of L2.
#
# How the site times these calls, and what a recording holds: :doc:`/measuring`.

print(f"each program reads {READ_BLOCK} float32 = {READ_BLOCK * 4 // 1024} KiB")
working_sets = [2.0**k for k in range(-2, 12)]  # MiB: 256 KiB to 2 GiB


def passes(mib):
    return max(2, 2**32 // int(mib * 2**20))  # 2**32 bytes (4 GiB) read per launch


for mib in (working_sets[0], working_sets[-1]):
    print(f"a {mib:g} MiB working set: {passes(mib):,} passes, "
          f"{passes(mib) * mib * 2**20:,.0f} bytes = {passes(mib) * mib / 2**10:g} GiB "
          f"read per launch")

# The pattern, checked against PyTorch on 4 blocks read in 3 passes: program p sums
# block p % 4, so each pass's row of sums is the 4 blocks' sums.
small = torch.randn(4 * READ_BLOCK, device=device)
sums = read_working_set(small, 3).view(3, 4)  # a row per pass, a column per block
blocks = small.view(4, READ_BLOCK).sum(dim=1)
print(f"3 passes over 4 blocks, each program's sum that of block p % 4: "
      f"{torch.allclose(sums, blocks.expand(3, 4), rtol=1e-5, atol=1e-4)}")

# %%
# The sweep, each GPU's L2 marked on the plot, and the two rates read off it:

sweep_working_sets(bench, "read bandwidth against working-set size", working_sets,
                   read_working_set, passes, sizes)

# %%
# Arithmetic intensity and the roofline
# -------------------------------------
# A kernel's **arithmetic intensity** is its FLOPs divided by the bytes it must move.
# Given a FLOP rate ``peak`` and a memory bandwidth, a kernel of intensity ``I`` is
# expected to run at no more than ``min(peak, I x bandwidth)``: that line is the
# *roofline*. Below the **ridge point** ``peak / bandwidth`` a kernel is memory bound;
# above it, compute bound. The roofs drawn here are references measured on each GPU,
# not the hardware's absolute limits: the bandwidth is a copy's, and a copy is not the
# fastest way to use memory. A stream that only reads passed the copy line in the sweep
# above, and a kernel can sit at or a little over its roof (the lines after the plot
# print each kernel's fraction of it). The table lists four of this project's kernels at
# the sizes this page uses, each named in its line; the first three are sizes their own
# pages also benchmark.
# Attention's shape (batch x heads x sequence length x head dimension) is chosen for
# this page, not one the attention page benchmarks:

kernels = {  # name: the kernel, its inputs (how many, their shape and dtype), its cost
    "vector_add fp32, n=2^26":
        (vector_add, 2, (2**26,), torch.float32, vector_add_cost(2**26)),
    "softmax fp32, 4096x4096":
        (softmax, 1, (4096, 4096), torch.float32, softmax_cost(4096, 4096)),
    "matmul fp16, 4096^3":
        (matmul, 2, (4096, 4096), torch.float16, matmul_cost(4096, 4096, 4096)),
    "attention fp16, 4x16x4096x64":
        (attention, 3, (4, 16, 4096, 64), torch.float16, attention_cost(4, 16, 4096, 64)),
}
costs = {name: cost for name, (*_, cost) in kernels.items()}
for name, cost in costs.items():
    print(f"{name:<30} {cost.flops / 1e9:10.2f} GFLOP {cost.bytes / 1e6:9.1f} MB "
          f"{cost.intensity:9.2f} FLOP/byte")
intensities = [cost.intensity for cost in costs.values()]
print(f"intensities span {max(intensities) / min(intensities):,.0f}x, from "
      f"{min(intensities):.3f} to {max(intensities):,.0f} FLOP/byte")

# %%
# Each kernel is timed on a GPU and its FLOPs over its time placed at its intensity. The
# roof of each GPU comes from two ceilings measured in the same run: the FLOP rate of a
# large float16 matrix product by cuBLAS (measured beside these timings), and the copy
# bandwidth of a 1 GiB tensor (the pale line of the working-set sweep above).
#
# The flat part of the roof is therefore the float16 tensor-core rate. It fits matmul
# and attention, which run their products on the tensor cores in float16. vector_add and
# softmax compute in float32 on the ordinary arithmetic units (the CUDA cores), which
# cannot reach that rate, so for them the flat part is too high. That does not change
# their places: they sit far left of the ridge point, on the sloped part, where the roof
# is set by bandwidth alone. In the plot each GPU has its own colour; the first GPU's
# points are filled and the others' hollow and larger, so that two GPUs' points at the
# same place both stay visible. A dotted line marks each kernel's intensity, its marker
# at the foot. After the plot, each GPU's ridge point and each kernel's fraction of its
# roof.


def run_kernel(name):  # the kernel on fresh random inputs
    fn, count, shape, dtype, _ = kernels[name]
    inputs = torch.randn(count, *shape, device=device, dtype=dtype).unbind(0)
    return lambda: fn(*inputs)


place_on_roofline(bench, "the project's kernels on the roofline", costs, run_kernel)

# %%
# Fusion: bytes moved by a chain against one kernel
# -------------------------------------------------
# Written as PyTorch operations, softmax is five kernels, each reading its inputs from
# GPU memory and writing its output back (the
# :ref:`softmax page <sphx_glr_auto_examples_core_kernels_02_softmax.py>` explains the
# kernel). Each of those reads and writes is a pass over memory. Whether HBM or L2
# serves it depends on the size: a tensor smaller than L2 may still be there when the
# next kernel reads it. The counts below are passes over memory either way. Counting the
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
# What the extra bytes cost in time is measured on the
# :ref:`softmax page <sphx_glr_auto_examples_core_kernels_02_softmax.py>`, which times
# the fused kernel against the chain beside their ratio of bytes.
#
# Takeaways
# ---------
# * PyTorch chooses kernels for whole tensors; CUDA leaves every thread to you; Triton
#   has you write one program over a block and handles the threads and shared memory.
# * HBM is large and slow, L2 smaller and faster, shared memory and registers tiny and
#   fastest: a kernel is fast when its bytes come from high in that list, or are few.
# * Below the ridge point (element-wise ops, softmax) time is bytes over bandwidth;
#   matrix products and attention have enough FLOPs per byte to be compute bound.
# * Fusing a chain of operations into one kernel divides the bytes moved: softmax's chain
#   moves 4x the bytes of the fused kernel.
#
# Used here: :func:`triton_guide.vector_add`, :func:`triton_guide.softmax`,
# :func:`triton_guide.softmax_naive`, :func:`triton_guide.matmul`,
# :func:`triton_guide.attention`, :func:`triton_guide.traffic.count_bytes`,
# :func:`triton_guide.traffic.read_working_set`,
# :class:`triton_guide.benchmark.Benchmark` (with
# :func:`~triton_guide.benchmark.sweep_working_sets` and
# :func:`~triton_guide.benchmark.place_on_roofline`).
