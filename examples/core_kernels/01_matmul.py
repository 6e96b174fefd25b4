"""
Matrix multiplication: tiles, tl.dot and the K loop
===================================================

A matrix product does far more arithmetic than it moves bytes, so unlike the previous pages
it can be bound by the tensor cores rather than by memory, if each tile of input is reused
enough. This page builds the tiled GEMM in ``triton_guide/matmul.py`` piece by piece.

You will learn:

* how an output tile is computed by walking along K with ``tl.dot``;
* how to handle sizes that are not multiples of the tile (masks along K, wrapped rows);
* grouped program ordering, and why it helps the L2 cache (with a picture and a count);
* autotuning tile sizes with ``triton.autotune``;
* TFLOP/s against size, next to cuBLAS.
"""

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from triton_guide import matmul, matmul_reference, runtime
from triton_guide.benchmark import Benchmark, tflop_per_s
from triton_guide.matmul import matmul_kernel
from triton_guide.testing import assert_close, tolerance

bench = Benchmark()  # timings: live on a GPU, else the recordings in results/
print(bench.stamp())
device = runtime.device()

# %%
# Arithmetic against traffic
# --------------------------
# ``C = A @ B`` with A of M x K and B of K x N does ``2 M N K`` floating-point operations and
# must move at least ``(M K + K N + M N)`` elements. For square fp16 matrices the ratio grows
# with the size: large products are limited by arithmetic, not memory.

for n in (256, 1024, 4096):
    flops = 2 * n**3
    moved = 2 * (3 * n * n)  # bytes, float16
    print(f"n = {n:>4}: {flops / 1e9:8.2f} GFLOP, {moved / 1e6:6.1f} MB moved at least, "
          f"{flops / moved:6.0f} FLOP per byte")

# %%
# One tile of C
# -------------
# A program owns a ``BLOCK_SIZE_M x BLOCK_SIZE_N`` tile of C. It walks along K, loading a
# ``BLOCK_SIZE_M x BLOCK_SIZE_K`` tile of A and a ``BLOCK_SIZE_K x BLOCK_SIZE_N`` tile of B at
# each step, and accumulates their product with ``tl.dot`` (which runs on the tensor cores)
# into a float32 accumulator:
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: matmul_kernel
#
# Ragged edges are handled twice over. Along M and N, row and column indices are wrapped
# with ``% M`` and ``% N``: the loads stay inside the matrices, the rows they fetch twice are
# computed but never stored (the store is masked). Along K the padding would change the
# sum, so the last K step masks its loads with ``other=0.0``: zeros add nothing.

# %%
# Grouped ordering
# ----------------
# Programs run roughly in the order of their id. With row-major order, programs 0..n-1
# compute a whole row of C tiles: they all read the same row of A tiles, but every column of
# B. Grouped order walks down ``GROUP_SIZE_M`` tile rows before moving right, so programs
# that run together share both A rows and B columns, and those tiles are still in L2.
# Below: the id of the program computing each tile of C (9 x 9 tiles), and how many distinct
# input tiles the first 27 programs touch.


def program_of_tile(num_m, num_n, group):
    order = np.zeros((num_m, num_n), dtype=int)
    for pid in range(num_m * num_n):
        if group is None:
            pid_m, pid_n = divmod(pid, num_n)
        else:
            in_group = group * num_n
            first_m = (pid // in_group) * group
            size_m = min(num_m - first_m, group)
            pid_m = first_m + (pid % in_group) % size_m
            pid_n = (pid % in_group) // size_m
        order[pid_m, pid_n] = pid
    return order


tiles, first = 9, 27
fig, axes = plt.subplots(1, 2, figsize=(9, 4.4))
for ax, group, name in ((axes[0], None, "row-major"), (axes[1], 3, "grouped, GROUP_SIZE_M = 3")):
    order = program_of_tile(tiles, tiles, group)
    ax.imshow(order < first, cmap="Blues", vmin=-0.3, vmax=1.3)
    for (i, j), pid in np.ndenumerate(order):
        ax.text(j, i, str(pid), ha="center", va="center", fontsize=7)
    a_rows = len({i for (i, j), pid in np.ndenumerate(order) if pid < first})
    b_cols = len({j for (i, j), pid in np.ndenumerate(order) if pid < first})
    ax.set_title(f"{name}\nfirst {first} programs read {a_rows} rows of A, {b_cols} columns of B",
                 fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    print(f"{name:<26}: the first {first} programs need {a_rows} tile rows of A and "
          f"{b_cols} tile columns of B ({(a_rows + b_cols) * tiles} input tiles)")
fig.tight_layout()

# %%
# Check against PyTorch
# ---------------------
# Odd sizes in every dimension, compared with a float64 product.

for m, n, k in [(1, 1, 1), (17, 31, 65), runtime.pick(interpreter=(129, 67, 250), gpu=(2049, 1537, 3073))]:
    for dtype in (torch.float32, torch.float16):
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        error = assert_close(matmul(a, b), matmul_reference(a.double(), b.double()),
                             rtol=tolerance(dtype, tensor_cores=True))
        print(f"M={m:<5} N={n:<5} K={k:<5} {str(dtype)[6:]:<8} relative error {error:.1e}")

# %%
# Autotuning
# ----------
# The best tile shape depends on the problem and the GPU. ``@triton.autotune`` times every
# configuration in its list the first time it meets a new ``(M, N, K)`` and then keeps the
# fastest. These are the candidates in the current mode (a single one under the interpreter,
# where there is nothing to time), and the winner for the last product above:

for config in matmul_kernel.configs:
    print(" ", config)
print("chosen:", matmul_kernel.best_config)

# %%
# Performance
# -----------
# TFLOP/s of square float16 products against cuBLAS (``torch.matmul``), in the same run.
# Each size is autotuned on its first call, before timing. The ceiling is cuBLAS on one
# large (8192^3) float16 product, measured in the same run.

sizes = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192]


def ours(size):
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)
    matmul(a, b)  # autotune outside the timed region
    return lambda: matmul(a, b)


def cublas(size):
    a = torch.randn(size, size, device=device, dtype=torch.float16)
    b = torch.randn(size, size, device=device, dtype=torch.float16)
    return lambda: a @ b


results = bench.sweep("matmul", sizes, {"triton_guide": ours, "cuBLAS": cublas},
                      lambda size, ms: tflop_per_s(2 * size**3, ms), label="n",
                      unit="TFLOP/s", ceiling="gemm_fp16",
                      xlabel="n (n x n x n, float16)")
results.plot()
results.summary(ratios=[("triton_guide", "cuBLAS")])
for run in results:
    best = max(range(len(run.xs)), key=lambda i: run["triton_guide"][i])
    ours_best = run["triton_guide"][best]
    print(f"{run.gpu}, best: n = {run.xs[best]}, {ours_best:.0f} TFLOP/s, "
          f"{ours_best / run['cuBLAS'][best]:.2f}x cuBLAS")

# %%
# Takeaways
# ---------
# * One program, one output tile; a loop over K; ``tl.dot`` into a float32 accumulator.
# * Mask along K (zeros add nothing); wrap or mask along M and N and mask the store.
# * Program order decides cache reuse; grouping is a few lines of index arithmetic.
# * Let the autotuner pick tile sizes, and always compare with cuBLAS measured in the same run.
