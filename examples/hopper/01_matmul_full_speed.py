"""
Matmul at full speed: aligned rows, tensor descriptors and the last wave
========================================================================

The autotuned tiled kernel of the :ref:`matrix product lesson
<sphx_glr_auto_examples_core_kernels_01_matmul.py>`, taken to the speed the package runs at
on a Hopper GPU (H100, H200), one technique per step. Each step is checked against a
float64 product and, where it can be timed, measured against cuBLAS in the same run.

You will learn:

* why a row that does not start on a 16-byte boundary slows every load, and how the
  launcher proves alignment to the kernel (``A_ALIGN``, ``A_COLUMNS``, the K rewrite) or
  copies the matrix into padded rows (step 1);
* reading tiles through tensor descriptors, Hopper's TMA copies, and when the launcher
  can use them (step 2);
* why a product can leave most of the GPU idle in its last wave of tiles, and what a
  second launch in smaller tiles does about it (step 3);
* what descriptors buy where B is stored by columns, as a fraction of cuBLAS (step 4).

On a GPU build the timings are live. On a CPU build they are the ones recorded on an H100
and an H200 by the matrix product lesson, which measured these techniques before they moved
to this page (the first line printed below says which recordings).
"""

# %%
import torch

from triton_guide import matmul, matmul_reference, runtime
from triton_guide.benchmark import (Benchmark, print_gain_against_spread, print_ratios,
                                    print_share_of, print_share_range, sweep_matmuls)
from triton_guide.matmul import (WAVE_TILE, default_split, has_tma, kernel_inputs,
                                 last_wave_split, multiprocessors, product)
from triton_guide.matrix_layout import layout, unaligned_runs
from triton_guide.matmul_steps import matmul_pointer_loads
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
# timings: live on a GPU, else recorded; this page's benchmarks were recorded by the matmul
# lesson (the page this one was split from), so it also recalls that page's recordings
bench = Benchmark(recordings_from="matmul")
print(bench.stamp())
device = runtime.device()

# %%
# Step 1: rows the kernel can read 16 bytes at a time
# ----------------------------------------------------
# The lesson's step 3, the autotuned pointer kernel ``matmul_kernel``, has parameters the
# lesson passed over:
#
# * Alignment hints. Triton compiles a separate kernel for integers that are multiples of
#   16, and only then knows that a row of A starts on a 16-byte boundary. At 1000 x 1000
#   it cannot know that, and it falls back to moving one element at a time. So:
#
#   - the launcher checks the row strides and sizes itself and passes the alignment it
#     finds (8 elements for rows of 1000 float16 values) as ``A_ALIGN``, ``B_ALIGN`` and
#     ``C_ALIGN``;
#   - the kernel states it for offsets with ``tl.multiple_of`` and
#     ``tl.max_contiguous``, which mark tensors only;
#   - for the sizes that the masks compare with, it rewrites K as
#     ``(K // A_ALIGN) * A_ALIGN`` and N as ``(N // C_ALIGN) * C_ALIGN`` (where A is
#     stored by columns, M by ``A_ALIGN`` instead of K; where B is, K by ``B_ALIGN``
#     too): the same number, now visibly a multiple, so a mask comes in runs of 8
#     elements and the masked loads and the store still move 16 bytes;
#   - a matrix stored column by column (a transposed view such as ``w.t()`` in
#     ``x @ w.t()``, or in any product of a backward pass) gets ``A_COLUMNS``
#     (``B_COLUMNS``) with the alignment of its columns, and ``tile_pointers`` (below)
#     states it down the columns instead of along the rows. Without it, a transposed B
#     whose columns are 1000 values long would be read one element at a time.
#
#   A hint is a promise: a wrong one gives wrong results, so it is only ever what the
#   launcher proved.
# * Rows no hint can help: 4093 float16 values are 8186 bytes, so only every eighth row
#   of A starts on a 16-byte boundary. For products large enough to repay it, the launcher
#   first copies A into rows padded with zeros to a multiple of 16 elements, and B into a
#   buffer stored column by column (a copy of ``b.t()``), its columns padded along K the
#   same way: B is read along K, so only K needs padding
#   (:func:`~triton_guide.matrix_layout.aligned_copies`; the zeros add nothing).
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: matmul_kernel
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: tile_pointers
#
#
# What the launcher finds for rows of a few lengths (:func:`~triton_guide.matrix_layout.layout`
# and :func:`~triton_guide.matrix_layout.unaligned_runs`, on 8 rows of float16 values):

for row_length in (1000, 4093, 4096):
    rows = torch.empty(8, row_length, device=device, dtype=torch.float16)
    _, align = layout(rows)
    starts = sum(r * row_length * rows.element_size() % 16 == 0 for r in range(8))
    print(f"rows of {row_length} ({row_length * rows.element_size()} bytes): alignment "
          f"{align:>2} element{'' if align == 1 else 's'}, {starts} of 8 rows start on a "
          f"16-byte boundary, padded copy for large products: {unaligned_runs(rows)}")


# %%
# Step 2: tensor descriptors
# --------------------------
# The pointer kernel computes every address it loads from: offsets, wraps round the
# edges, a mask along K, and the alignment hints that keep its loads 16 bytes wide. A Hopper GPU can
# fetch a whole tile with none of that, and :func:`~triton_guide.matmul.matmul` uses it: a
# second kernel, the same loop with its tiles read through *tensor descriptors*. The
# launcher builds one on the host for each matrix
# (``triton.tools.tensor_descriptor.TensorDescriptor``: the base pointer, the shape, the
# strides, the tile shape) and the kernel asks for a tile by the coordinates of its
# corner, ``desc.load([row, col])``. On Hopper GPUs that is done by the Tensor Memory
# Accelerator (TMA), a unit in each SM that moves the tile into shared memory in one or a
# few instructions and returns zeros past the edges, so there are no offsets to compute and
# no masks or wraps. A matrix stored by
# columns is described as its transpose, whose rows are its columns, and ``.T`` turns each
# tile back:
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: descriptor_tile
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: matmul_tma_kernel
#
# Three details make it work in every case ``matmul`` accepts:
#
# * **The tile shape.** A descriptor's tile shape has to match the configuration the
#   autotuner is trying, so each configuration carries a pre-hook that sets it
#   (``_set_tile_shapes`` in ``triton_guide/matmul.py``).
# * **Rows TMA cannot read.** The matrix's start and the distance between its rows
#   (columns) must be multiples of 16 bytes. Rows of 4093 float16 values are 8186 bytes
#   apart, and no descriptor can read them. For a product large enough to repay it, the
#   launcher copies such a matrix into a buffer whose rows are padded to the next 16
#   bytes. Unlike step 1's copies, this one keeps the matrix's own order (rows or
#   columns), so it reads and writes memory in long runs, and it leaves the padding
#   unwritten: the descriptor has the matrix's own shape, and past it the copy engine
#   returns zeros.
# * **An output with such rows.** A row of 4097 float16 values starts off a 16-byte
#   boundary, and the store could write it only one value at a time. So for large
#   products the kernel writes c into rows padded to 16 bytes (the padding columns,
#   products with the zeros past B's edge, are zeros), and the launcher copies the real
#   columns out (:func:`~triton_guide.matmul.output_width`).
#
# Small products of such rows, and GPUs without TMA, keep the pointer kernel. Measured on an
# H100 on the same float16 and bfloat16 inputs, from 1 row to 8192 and in every layout,
# the descriptor kernel ran level with the pointer kernel (a few percent behind at worst)
# or ahead of it, furthest where B is stored by columns (step 4 measures that case). One
# more condition, for float32 only: Hopper's tensor cores take TF32 operands with A stored
# by rows and B by columns, and in any other order the kernel transposes every tile in its
# loop, so large float32 products first copy their inputs into that order (``k_major``):
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: kernel_inputs
#
# .. literalinclude:: /../triton_guide/matrix_layout.py
#    :pyobject: row_aligned
#
# What it does for a few float16 products (in this mode):

for (m, n, k), order in [((4096, 4096, 4096), "by rows"), ((4096, 4096, 4096), "by columns"),
                         ((1000, 1000, 1000), "by columns"), ((4095, 4097, 4093), "by rows"),
                         ((127, 97, 257), "by rows")]:
    a = torch.empty(m, k, device=device, dtype=torch.float16)
    if order == "by rows":
        b = torch.empty(k, n, device=device, dtype=torch.float16)
        b_runs = f"rows {n * 2}"
    else:
        b = torch.empty(n, k, device=device, dtype=torch.float16).t()
        b_runs = f"columns {k * 2}"
    a_in, b_in, descriptors = kernel_inputs(a, b)
    copied = [name for name, x, x_in in (("A", a, a_in), ("B", b, b_in))
              if x_in.data_ptr() != x.data_ptr()]
    path = "descriptors" if descriptors else "pointer loads"
    print(f"{m:>4} x {n} x {k:<4} B {order:<10} (A's rows {k * 2} bytes apart, B's {b_runs}): "
          f"{path}, copies of {' and '.join(copied) or 'none'}")

# %%
# Checked against float64, B stored by columns and by rows, at sizes that are not
# multiples of the tiles, each with the path it took:

for m, n, k in runtime.pick(interpreter=[(272, 48, 80), (330, 250, 411)],
                            gpu=[(4112, 4080, 1040), (1031, 517, 2063)]):
    a = torch.randn(m, k, device=device, dtype=torch.float16)
    for order, b in (("by columns", torch.randn(n, k, device=device, dtype=torch.float16).t()),
                     ("by rows", torch.randn(k, n, device=device, dtype=torch.float16))):
        error = assert_close(matmul(a, b), matmul_reference(a.double(), b.double()),
                             rtol=tolerance(torch.float16, tensor_cores=True))
        a_in, b_in, descriptors = kernel_inputs(a, b)
        copied = a_in.data_ptr() != a.data_ptr() or b_in.data_ptr() != b.data_ptr()
        copies = " after copies" if copied else ""
        path = ("descriptors" if descriptors else "pointer loads") + copies
        print(f"M={m:<5} N={n:<5} K={k:<5} float16, B {order:<10}: {path}, "
              f"relative error {error:.1e}")


# %%
# Step 3: the last wave
# ----------------------
# A kernel's programs run in *waves*: as many at a time as the SMs hold, then the next
# batch as programs finish. The largest tiles the autotuner tries, 128 x 256 with 8 warps,
# keep their pipeline stages of a and b tiles in so much shared memory that an SM holds
# only one such program at a time (the sizes and the count are printed below). A product
# whose tiles number a few more than a multiple of the SMs then ends with a wave of a few
# tiles, and while those run, most SMs have nothing to do: that wave costs as long as a
# full one for a fraction of its work. So where 128 x 256 tiles leave a last wave at most
# a quarter full, after two to four full ones, ``product`` computes the rows of that last
# wave in 128 x 64 tiles, a quarter of the work each and four times as many, by a second
# launch of the same kernel. The rule's docstring refers to the comment above it in
# ``triton_guide/matmul.py``, which says where it was measured; both are shown here:
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :start-at: # The last wave.
#    :end-at: FULL_WAVES = range(
#
# .. literalinclude:: /../triton_guide/matmul.py
#    :pyobject: last_wave_split
#
# In short, the conditions are where it was measured to win, on an H100 with the split and
# the single launch timed in turns: after a single full wave it gained nothing, where the
# last wave is fuller the smaller tiles cost more than the idle SMs did, and a ragged product
# (N and K not multiples of the large tile) ran slower split. Even where the rule splits,
# the gain was not the same at every K (3072 x 3072 at K = 1024 and 8192 measured level).
# ``matmul`` asks the rule only on Hopper GPUs, for 16-bit inputs
# (:func:`~triton_guide.matmul.default_split`): that is where it was measured, and where
# the stages fit. The rule for a few products on this GPU (under the interpreter, which has
# no SMs, on an H100's 132):

sms = multiprocessors(device) if device.type == "cuda" else 132
tile_m, tile_n, tile_k, _, stages, _ = WAVE_TILE
stage_bytes = stages * (tile_m * tile_k + tile_k * tile_n) * 2  # float16
print(f"{tile_m} x {tile_n} tiles, {stages} stages of {tile_m} x {tile_k} and {tile_k} x "
      f"{tile_n} float16 tiles: {stage_bytes / 1024:.0f} KiB of shared memory per program")
if device.type == "cuda":
    properties = torch.cuda.get_device_properties(device)
    per_program = properties.shared_memory_per_block_optin
    per_sm = properties.shared_memory_per_multiprocessor
    source = "this GPU's (torch.cuda.get_device_properties)"
else:  # NVIDIA's Hopper tuning guide: 228 KiB per SM, of which one program may use 227
    per_program, per_sm = 227 * 1024, 228 * 1024
    source = "not available under the interpreter; an H100's, from NVIDIA's specification"
print(f"shared memory, {source}: at most {per_program / 1024:.0f} KiB per program, "
      f"{per_sm / 1024:.0f} KiB per SM")
fits = per_sm // stage_bytes if stage_bytes <= per_program else 0
print(f"so an SM holds {fits} program{'' if fits == 1 else 's'} of "
      f"{stage_bytes / 1024:.0f} KiB at a time")
for m, n in [(2304, 2304), (3072, 3072), (4096, 4096), (2000, 3072), (8192, 8192)]:
    tiles = -(-m // tile_m) * -(-n // tile_n)
    full_waves, tail = divmod(tiles, sms)
    split = last_wave_split(m, n, 4096, sms)
    plan = f"rows {split}-{m - 1} in 128 x 64 tiles" if split else "one launch"
    waves = f"{full_waves:>2} full wave{'' if full_waves == 1 else 's'}"
    print(f"{m} x {n} x 4096 on {sms} SMs: {tiles:>4} tiles of {tile_m} x {tile_n}, {waves} and "
          f"{tail:>3} tiles ({tail / sms:4.0%} of a wave, {sms - tail:>3} SMs idle): {plan}")

# %%
# The two launches compute the same product as one (here with the rows from 128 on in the
# smaller tiles, under the interpreter, or where ``matmul`` splits on this GPU):

m, n, k = runtime.pick(interpreter=(304, 200, 80), gpu=(3072, 3072, 512))
a = torch.randn(m, k, device=device, dtype=torch.float16)
b = torch.randn(k, n, device=device, dtype=torch.float16)
split = runtime.pick(interpreter=128, gpu=default_split(a, n, k) if has_tma(device) else 0)
if split:
    error = assert_close(product(a, b, descriptors=True, split=split),
                         matmul_reference(a.double(), b.double()),
                         rtol=tolerance(torch.float16, tensor_cores=True))
    print(f"{m} x {n} x {k} float16, rows {split}-{m - 1} by a second launch: "
          f"relative error {error:.1e}")
else:
    print(f"{m} x {n} x {k}: this GPU keeps one launch (no TMA, or no last wave to split)")


# %%
# What the second launch buys, in GPU time against cuBLAS in the same run: ``matmul`` as
# it is, and its autotuned single launch (``product(..., split=0)``), on square float16
# products (each call on copies of the inputs too large together for the L2 cache,
# replayed in a CUDA graph: :doc:`/measuring` says how the site times them). ``matmul``
# on a GPU with TMA (both GPUs recorded here have it) runs the descriptor kernel of step 2.
#
# At 3072 the rule splits; at 4096 it keeps one launch, so there the two series time the
# same code, and the gap between them is one sample of the measurement's spread. A gain at
# 3072 no larger than that gap is not shown by this run. The second launch also has a
# price these GPU times leave out: the host builds two more descriptors and launches once
# more per call, which a program that waits for each product pays.


def one_launch(a, b):  # matmul without the split
    a, b, descriptors = kernel_inputs(a, b)
    return product(a, b, descriptors, split=0)


last_wave = sweep_matmuls(bench, "matmul, the last wave", [3072, 4096],
                          {"matmul": matmul, "one launch": one_launch,
                           "cuBLAS": matmul_reference}, gpu_time=True)
print_share_range(last_wave, "cuBLAS")
# matmul over one launch: at 3072 the split's gain, at 4096 the same code timed twice
print_ratios(last_wave, "matmul", "one launch")


# %%
# Step 4: what descriptors buy
# ----------------------------
# The pointer kernel and the descriptor kernel on one square float16 product large enough
# to fill the GPU with thousands of tiles, with B stored by columns (``b.t()`` of a square
# matrix, the layout of ``x @ w.t()``), where the pointer kernel reads B down its columns;
# cuBLAS on the same product, in the same run. Each call is timed as a program makes it,
# on the same inputs every call, after compiling and autotuning.

ladder_n = 8192

# %%
# The sweep, and each kernel as a share of cuBLAS. The variants keep the names the
# lesson recorded them under: "step 3 pointer loads" is the pointer kernel
# (``matmul_pointer_loads``), "step 4 descriptors" is ``matmul`` with its descriptors.

column_steps = {
    "step 3 pointer loads": matmul_pointer_loads,
    "step 4 descriptors": matmul,
    "cuBLAS": matmul_reference,
}
column_ladder = sweep_matmuls(bench, "steps ladder, b by columns", [ladder_n], column_steps,
                              b_by_columns=True, xlabel="n (float16, b stored by columns)")
print_share_of(column_ladder, "cuBLAS")
descriptor_gains = print_ratios(column_ladder, "step 4 descriptors", "step 3 pointer loads")

# %%
# Takeaways
# ---------
# From what this page computed and printed above:

print(f"* Alignment: of rows of 1000, 4093 and 4096 float16 values, the launcher proves "
      f"{layout(torch.empty(8, 1000, device=device, dtype=torch.float16))[1]}, "
      f"{layout(torch.empty(8, 4093, device=device, dtype=torch.float16))[1]} and "
      f"{layout(torch.empty(8, 4096, device=device, dtype=torch.float16))[1]} elements; "
      "rows no hint can help are copied into padded rows for large products.")
print(f"* Tensor descriptors: in this build's mode, the 4096^3 product "
      + ("reads its tiles through descriptors." if kernel_inputs(
          torch.empty(4096, 4096, device=device, dtype=torch.float16),
          torch.empty(4096, 4096, device=device, dtype=torch.float16))[2]
         else "keeps the pointer kernel (no TMA here)."))
for gpu, (ratio,) in descriptor_gains.items():
    print(f"* {gpu}, B stored by columns at {ladder_n}^3: descriptors / pointer loads "
          f"= {ratio:.2f}")
split_gains = print_gain_against_spread(last_wave, "matmul", "one launch", 3072, 4096,
                                        context="the last wave", bullet=True)
if not descriptor_gains and not split_gains:
    print("* No GPU timings recorded or measured in this build: the speed-ups are not shown.")

# %%
# Count the waves, prove the alignment you hint, and let descriptors fetch whole tiles:
# then measure each change against cuBLAS in the same run, and against the spread between
# two timings of the same code. ``benchmarks/report.py`` compares the package with cuBLAS
# over many more shapes.
#
# Used here: :func:`triton_guide.matmul`, :func:`triton_guide.matmul_reference`,
# :func:`triton_guide.matrix_layout.layout`, :func:`triton_guide.matrix_layout.unaligned_runs`,
# :func:`triton_guide.matmul.kernel_inputs`, :func:`triton_guide.matmul.last_wave_split`,
# :func:`triton_guide.matmul.default_split`, :func:`triton_guide.matmul.product`,
# :func:`triton_guide.matmul_steps.matmul_pointer_loads`,
# :class:`triton_guide.benchmark.Benchmark` (with ``recordings_from``),
# :func:`triton_guide.benchmark.sweep_matmuls`.
