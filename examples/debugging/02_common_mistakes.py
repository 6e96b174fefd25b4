"""
Common mistakes, run and then fixed
===================================

Most broken Triton kernels compile, run and return a tensor of the right shape. The
mistakes below are the ones learners make most often; each is executed here, and its
output printed beside the output of the fixed version, so that you know what each one
looks like when it happens to you.

The wrong kernels live on this page and their names start with ``wrong_``: they exist to
fail. Mistakes 2 and 4 instead launch a correct kernel of the package the wrong way.
The fixed versions are the package's own kernels, the ones the tests check, with two
exceptions: mistake 6 runs one small kernel of this page both ways (int32 and int64
offsets), and mistake 9 is shown in plain PyTorch, its fixed kernel being on the flash
attention page.

You will learn what these look like, and their fixes:

* a load or store without a mask; launching ``N // B`` programs;
* a forgotten ``[:, None]``; assuming a tensor is contiguous when it is a transposed
  view;
* ``other=0`` where a maximum needs ``-inf``; int32 offsets on a large tensor;
* a block size that is not a power of two;
* programs that add into one output without atomics;
* normalising a softmax inside each tile.
"""

# %%
import math

import torch
import triton
import triton.language as tl

from triton_guide import runtime, softmax, softmax_reference, transpose, vector_add
from triton_guide import vector_sum
from triton_guide.benchmark import Benchmark
from triton_guide.transpose import transpose_kernel
from triton_guide.vector_add import vector_add_kernel

print(Benchmark().stamp())
device = runtime.device()
torch.manual_seed(0)

# %%
# 1. A load and a store without a mask
# ------------------------------------
# The last program of a launch usually owns a partial block. Without a mask its extra
# lanes read and write memory past the end of the tensor. Here is the vector-add kernel
# with the masks left out:


@triton.jit
def wrong_add_without_mask(x_ptr, y_ptr, out_ptr, BLOCK_SIZE: tl.constexpr):
    # WRONG: no mask, so every lane of the last block loads and stores.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)


# %%
# To watch what happens without risking a crash, the 10-element input and output are the
# start of larger buffers, so that "past the end" is memory we own and can print. The
# input's neighbours hold 7, the output's neighbours hold -1 (say, another tensor's
# data).

n, block = 10, 16
x_buffer = torch.full((block + 4,), 7.0, device=device)
out_buffer = torch.full((block + 4,), -1.0, device=device)
x = x_buffer[:n]
x.copy_(torch.arange(n, dtype=torch.float32))
out = out_buffer[:n]
wrong_add_without_mask[(1,)](x, x, out, BLOCK_SIZE=block)
def whole_numbers(values):
    """A buffer of whole numbers, printed short enough to stay on one line."""
    return "[" + ", ".join(f"{value:g}" for value in values.tolist()) + "]"


print("without a mask, the output buffer:", whole_numbers(out_buffer))
overwritten = out_buffer[n:][out_buffer[n:] != -1.0]
out_buffer.fill_(-1.0)
out_buffer[:n] = vector_add(x, x, block_size=block)
print("with the mask (vector_add):      ", whole_numbers(out_buffer))
print(f"lanes {n}..{block - 1} read the neighbours' {x_buffer[n].item():g}s and "
      f"overwrote {overwritten.numel()} elements of the neighbouring data with "
      + ", ".join(f"{value:g}" for value in sorted(set(overwritten.tolist()))))

# %%
# Nothing failed: the wrong kernel silently corrupted the data next to its output. That
# is what happens on a GPU too, as long as the stray lanes stay inside memory the
# process owns (PyTorch's allocator hands out slices of large blocks, so they usually
# do). Past the end of everything allocated, a GPU stops with an "illegal memory access"
# error that ends the process's CUDA context; the interpreter instead reads and writes
# whatever CPU memory lies there, which can corrupt the Python process's heap and crash
# it later. The lines above were printed by whichever of the two ran this page (see the
# first cell).
#
# **Fix**: ``mask = offsets < n`` on every load and store, as in
# :func:`triton_guide.vector_add`.

# %%
# 2. ``N // B`` programs
# ----------------------
# ``N // B`` rounds down: when ``N`` is not a multiple of ``B`` the tail is never
# touched. The package's correct kernel, launched with the wrong grid, on an output
# filled with NaN so that unwritten elements show:

n, block = 1000, 64
a, b = torch.randn(2, n, device=device).unbind(0)
out = torch.full((n,), math.nan, device=device)
vector_add_kernel[(n // block,)](a, b, out, n, BLOCK_SIZE=block)
print(f"grid = {n} // {block} = {n // block} programs cover {n // block * block} "
      f"elements; {int(out.isnan().sum())} of {n} outputs were never written")
out = vector_add(a, b, block_size=block)
print(f"grid = cdiv({n}, {block}) = {triton.cdiv(n, block)} programs: "
      f"{int(out.isnan().sum())} unwritten, equal to a + b: {torch.equal(out, a + b)}")

# %%
# **Fix**: ``triton.cdiv(N, B)`` programs (``(N + B - 1) // B``), and a mask for the
# tail. Filling outputs with NaN while developing makes every unwritten element visible.

# %%
# 3. ``[:, None]`` forgotten
# --------------------------
# A 2D tile of offsets is a column of row indices plus a row of column indices. Forget
# the ``[:, None]`` and ``[None, :]`` and the two blocks are added lane by lane instead:
# with equal block sizes that still compiles, and gives the *diagonal* of each tile.


@triton.jit
def wrong_transpose_without_broadcast(
    input_ptr, output_ptr, num_rows, num_cols, row_stride, out_row_stride,
    BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    # WRONG: rows and cols are both 1D, so these are BLOCK offsets, not BLOCK x BLOCK.
    mask = (rows < num_rows) & (cols < num_cols)
    tile = tl.load(input_ptr + rows * row_stride + cols, mask=mask)
    tl.store(output_ptr + cols * out_row_stride + rows, tile, mask=mask)


matrix = torch.arange(64, dtype=torch.float32, device=device).reshape(8, 8)
out = torch.full((8, 8), math.nan, device=device)
wrong_transpose_without_broadcast[(2, 2)](matrix, out, 8, 8, 8, 8, BLOCK=4)
print("without [:, None] (NaN = never written):")
print(out.cpu())
right = transpose(matrix, block_rows=4, block_cols=4)
print(f"{int(out.isnan().sum())} of {out.numel()} elements unwritten; transpose() "
      f"equal to matrix.t(): {torch.equal(right, matrix.t())}")

# %%
# With unequal block sizes the same mistake fails to compile, with an error about
# incompatible shapes, which is the lucky case: the section "Reading the common compile
# errors" of the :ref:`debugging page <sphx_glr_auto_examples_debugging_01_debugging.py>`
# shows that error, for a block of 16 row indices added to a block of 32 column
# indices. **Fix**: ``rows[:, None] * row_stride + cols[None, :]``, as in
# :func:`triton_guide.transpose`.

# %%
# 4. Assuming a transposed tensor is contiguous
# ---------------------------------------------
# ``x.t()`` moves no data: it is a view with swapped strides. A launcher that passes
# ``(num_cols, 1)`` as strides because "a matrix is row-major" reads the wrong elements.
# The package's transpose kernel, launched with assumed strides on a transposed view:

base = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6)
view = base.t()  # 6 x 4, the same memory as base
print(f"view: shape {tuple(view.shape)}, strides {view.stride()}, "
      f"contiguous: {view.is_contiguous()}")
rows, cols = view.shape
out = torch.empty(cols, rows, device=device)
transpose_kernel[(1, 1)](
    view, out, rows, cols,
    cols, 1,  # WRONG: the strides of a contiguous 6 x 4 matrix, not view.stride()
    out.stride(0), out.stride(1), BLOCK_ROWS=8, BLOCK_COLS=8,
)
print("transpose of the view with assumed strides:")
print(out.cpu())
right = transpose(view)  # passes view.stride()
print(f"with the real strides it is base again: {torch.equal(right, base)}; "
      f"the wrong one differs in {int((out != base).sum())} of {base.numel()} elements")

# %%
# **Fix**: pass ``x.stride(i)`` to the kernel and use them (as
# :func:`triton_guide.transpose` does), or refuse non-contiguous input with a clear
# error, as :func:`triton_guide.vector_add` does:

try:
    vector_add(view, view)
except ValueError as error:
    print("ValueError:", error)

# %%
# 5. ``other=0`` where a maximum needs ``-inf``
# ---------------------------------------------
# Masked-off lanes of a load take the value ``other``. For a sum, 0 is harmless. For a
# maximum it is not: a row whose values are all negative gets a maximum of 0 from the
# padding. In a softmax the padding lanes then also add ``exp(0 - max)`` each to the
# denominator. Here is a minimal softmax kernel with that mistake: one row per program,
# simpler than the package's :func:`triton_guide.softmax`, which pads with ``-inf`` and
# gives the right answer beside it:


@triton.jit
def wrong_softmax_padding_zero(
    input_ptr, output_ptr, input_row_stride, output_row_stride, num_cols,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < num_cols
    # WRONG: padding lanes read 0, which joins both the max and the sum.
    x = tl.load(input_ptr + row * input_row_stride + cols, mask=mask, other=0.0)
    numerator = tl.exp(x - tl.max(x, axis=0))
    result = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row * output_row_stride + cols, result, mask=mask)


rows = torch.tensor([[-3.0, -2.0, -1.0, -4.0, -5.0], [4.0, 7.0, 5.0, 6.0, 8.0]],
                    device=device)
wrong = torch.empty_like(rows)
wrong_softmax_padding_zero[(2,)](rows, wrong, 5, 5, 5, BLOCK_SIZE=8)
right = softmax(rows)
for i, name in enumerate(("all negative", "all positive")):
    error = (wrong[i] - right[i]).abs().max().item()
    print(f"{name} row: wrong probabilities sum to {wrong[i].sum().item():.4f} "
          f"(right: {right[i].sum().item():.4f}); largest error {error:.1e}")
padding = 8 - rows.shape[1]  # lanes of the block of 8 past the row's 5 values
top = rows[1].max().item()
print(f"positive row: maximum {top:g}; its {padding} padding lanes add {padding} x "
      f"exp(0 - {top:g}) = {padding * math.exp(-top):.1e} to a sum of at least 1")

# %%
# On the all-negative row the result is far off. On the positive row the row's true
# maximum wins over the padding's 0, and the padding lanes add only the small amount
# printed above to the sum: the error is small enough to pass a loose test on random
# data, which is why this mistake survives. **Fix**: ``other=-float("inf")`` for a
# maximum (and the identity of whatever the reduction is: 0 for a sum, 1 for a product).

# %%
# 6. int32 offsets on a large tensor
# ----------------------------------
# Program ids and ``tl.arange`` are int32, and so is an integer argument that fits in 32
# bits. ``row * row_stride`` is then computed in int32 and wraps past ``2**31 - 1``.
# A realistic case: the logits of 32,768 tokens over a vocabulary of 128,256 (Llama 3's
# size), one row per token.

tokens, vocab = 32_768, 128_256
print(f"{tokens:,} x {vocab:,} = {tokens * vocab:,} elements; int32 holds up to "
      f"2**31 - 1 = {2**31 - 1:,}")
first_bad_row = math.ceil(2**31 / vocab)  # the first row whose start is past 2**31 - 1
first_bad_element_row, first_bad_col = divmod(2**31, vocab)  # where offset 2**31 falls
print(f"element (r, c) is at offset r * {vocab:,} + c:")
print(f"  row {first_bad_element_row:,} starts below 2**31, but from column "
      f"{first_bad_col:,} on its offsets pass 2**31 - 1")
print(f"  row {first_bad_row:,} of {tokens:,} is the first whose start passes 2**31 - 1")

# %%
# That tensor would take the memory printed below in float16; the arithmetic alone shows
# the problem. This tiny kernel computes each row's offset and stores it (as int64)
# instead of using it:

print(f"{tokens:,} x {vocab:,} float16 values: {tokens * vocab * 2 / 1e9:.1f} GB")


@triton.jit
def row_offsets(
    out_ptr, first_row, row_stride, BLOCK: tl.constexpr, WIDE: tl.constexpr
):
    rows = first_row + tl.arange(0, BLOCK)  # int32, like a row from tl.program_id
    if WIDE:
        rows = rows.to(tl.int64)  # the fix: widen before multiplying
    tl.store(out_ptr + tl.arange(0, BLOCK), rows * row_stride)


first_row = first_bad_row - 2
offsets32 = torch.empty(4, dtype=torch.int64, device=device)
offsets64 = torch.empty(4, dtype=torch.int64, device=device)
row_offsets[(1,)](offsets32, first_row, vocab, BLOCK=4, WIDE=False)
row_offsets[(1,)](offsets64, first_row, vocab, BLOCK=4, WIDE=True)
for i in range(4):
    print(f"row {first_row + i:,}: int32 offset {offsets32[i].item():>15,}   "
          f"int64 offset {offsets64[i].item():>15,}")

# %%
# The kernel stores only the start of each row. A kernel that adds the column to an
# int32 row start goes wrong one row earlier, from the column printed above. A negative
# offset points before the tensor: the kernel reads or writes someone else's memory, or
# faults. **Fix**: widen to int64 before the multiplication,
# ``row.to(tl.int64) * row_stride`` (the package's attention kernels do this for their
# batch and head offsets, its norm and cross-entropy kernels for their row offsets).
# int64 arithmetic costs more than int32, so the launchers of
# :func:`triton_guide.vector_add`, :func:`triton_guide.transpose`,
# :func:`triton_guide.softmax` and :func:`triton_guide.matmul` widen only when they
# must: once per launch they ask
# :func:`~triton_guide.validation.needs_int64_offsets` whether any offset can pass
# ``2**31 - 1``, and pass the answer as the constexpr ``INT64_OFFSETS``, which selects a
# compiled variant of the kernel that computes its offsets in int64.

# %%
# 7. A block size that is not a power of two
# ------------------------------------------
# ``tl.arange(0, 1000)`` is refused when the kernel is compiled (the interpreter checks
# it too):


@triton.jit
def wrong_fill(out_ptr, BLOCK_SIZE: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK_SIZE), 1.0)  # WRONG for BLOCK_SIZE = 1000


try:
    wrong_fill[(1,)](torch.empty(1000, device=device), BLOCK_SIZE=1000)
except Exception as error:  # CompilationError on a GPU, InterpreterError on the CPU
    message = str(error).strip().splitlines()[-1]
    print(f"{type(error).__name__}: ...{message[-60:]}")

# %%
# **Fix**: round the block up, ``triton.next_power_of_2(n)``, and mask the extra lanes;
# the package's softmax does this for its rows. The padding costs lanes that do nothing,
# and for a length just past a power of two it is almost half the block:

for length in (1000, 1025, 4097):
    padded = triton.next_power_of_2(length)
    print(f"row of {length}: block {padded}, {padded - length} idle lanes "
          f"({(padded - length) / padded:.0%})")
row = torch.randn(3, 1000, device=device)
error = (softmax(row) - softmax_reference(row)).abs().max().item()
print(f"softmax on rows of {row.shape[1]} (block {triton.next_power_of_2(row.shape[1])}, "
      f"masked): largest difference from torch {error:.1e}")

# %%
# 8. Programs adding into one output without atomics
# --------------------------------------------------
# To sum a vector, each program sums its block and then adds the result into one cell.
# Written as a load, an addition and a store, two programs can both load the same old
# value, and one of their additions is lost:


@triton.jit
def wrong_sum_without_atomics(x_ptr, out_ptr, num_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < num_elements, other=0.0)
    # WRONG: another program can change out_ptr between this load and this store.
    tl.store(out_ptr, tl.load(out_ptr) + tl.sum(x, axis=0))


n = runtime.pick(interpreter=64 * 1024, gpu=2**24)
ones = torch.ones(n, device=device)  # the exact sum is n, and float32 holds it exactly
wrong_sums = []
for _ in range(runtime.pick(interpreter=2, gpu=5)):
    total = torch.zeros(1, device=device)
    wrong_sum_without_atomics[(n // 1024,)](ones, total, n, BLOCK_SIZE=1024)
    wrong_sums.append(int(total.item()))
short_runs = sum(total != n for total in wrong_sums)
print(f"{n // 1024} programs, exact sum {n:,}; without atomics, runs gave: "
      + ", ".join(f"{s:,}" for s in wrong_sums)
      + f" ({short_runs} of {len(wrong_sums)} runs short)")
print(f"vector_sum (atomic): {int(vector_sum(ones, method='atomic').item()):,}; "
      f"vector_sum (two-stage): {int(vector_sum(ones).item()):,}")

# %%
# The interpreter runs the programs one after another, so no two of them ever overlap:
# when it ran this page (see the first cell), every run above printed the exact sum and
# none came out short. **The interpreter cannot show a race.** On a GPU many programs
# run at once, two can load the cell before either stores, and a run that loses an
# update comes out short; a GPU build prints above how many of its runs did, and the
# totals can differ from run to run. Here is the interleaving that loses an update,
# replayed by hand for two programs that each add 1024:

cell = 0.0
a_sees = cell  # program A loads the cell
b_sees = cell  # program B loads it before A has stored
cell = a_sees + 1024  # A stores
cell = b_sees + 1024  # B stores, overwriting A's addition
print(f"A and B both loaded {a_sees:.0f}; the cell ends at {cell:.0f}, not 2048")

# %%
# **Fix**: ``tl.atomic_add``, or a partial sum per program and a second pass
# (:func:`triton_guide.vector_sum` does both; the
# :ref:`reductions page <sphx_glr_auto_examples_core_kernels_06_reductions.py>` compares
# them).

# %%
# 9. Normalising the softmax inside each tile
# -------------------------------------------
# Attention kernels read the keys in tiles. Applying a softmax to each tile's scores on
# its own makes each tile's weights sum to 1, so a query's weights over all keys sum to
# the number of tiles:

scores = torch.randn(256, dtype=torch.float64)
tile = 64
per_tile = torch.cat([torch.softmax(part, dim=0) for part in scores.split(tile)])
whole = torch.softmax(scores, dim=0)
print(f"{scores.numel()} scores in tiles of {tile}: per-tile weights sum to "
      f"{per_tile.sum().item():.3f}, a real softmax to {whole.sum().item():.3f}; "
      f"largest weight error {(per_tile - whole).abs().max().item():.3f}")

# %%
# **Fix**: the online softmax, which carries a running maximum and sum from tile to tile
# and rescales what it has accumulated; the :ref:`flash attention page
# <sphx_glr_auto_examples_core_kernels_03_flash_attention.py>` runs the wrong version
# on a full attention and then builds the right one.

# %%
# Takeaways
# ---------
# * Mask every load and store that can reach past the end; launch ``cdiv(N, B)``
#   programs; fill outputs with NaN while developing, so that gaps show.
# * Build 2D offsets with ``[:, None]`` and ``[None, :]``, from the tensor's real
#   strides.
# * Pad a masked load with the identity of the reduction: ``-inf`` for a max.
# * Widen to int64 before multiplying a row index by a stride on large tensors.
# * Blocks are powers of two: round up and mask.
# * Combine programs with atomics or a second pass, never with a plain load and store;
#   the interpreter cannot show that race.
# * Normalise a softmax once, over the whole row (online, across tiles).
#
# Used here: :func:`triton_guide.vector_add`, :func:`triton_guide.transpose`,
# :func:`triton_guide.softmax`, :func:`triton_guide.softmax_reference`,
# :func:`triton_guide.vector_sum`.
