"""
Grid math: how many programs, and who owns what
===============================================

Every launch needs a grid: how many programs to start along each axis. Launch one program
too few and part of your output is never written, with no error. One too many does no
harm: the mask switches off every lane of the extra program. This page does the
arithmetic, draws who owns which element, and shows what goes wrong with ``N // B``.

You will learn:

* ``triton.cdiv(N, B)`` and the ``(N + B - 1) // B`` formula behind it;
* the worked numbers for a 1D vector and a 2D matrix of tiles;
* how a program finds its tile from ``tl.program_id(0)`` and ``tl.program_id(1)``;
* how to catch an undersized grid: poison the output and count what was never written.
"""

# %%
import torch
import triton

from triton_guide import runtime
from triton_guide.benchmark import Benchmark, draw_element_owners, draw_tile_owners
from triton_guide.vector_add import vector_add_kernel

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
print(Benchmark().stamp())
device = runtime.device()

# %%
# Ceiling division
# ----------------
# ``N`` elements in blocks of ``B`` need ``ceil(N / B)`` programs. In integers,
# ``(N + B - 1) // B``: adding ``B - 1`` pushes any remainder over the next multiple of
# ``B``. ``triton.cdiv`` is exactly that formula.

N, B = 1000, 64
print(f"(N + B - 1) // B = ({N} + {B} - 1) // {B} = {(N + B - 1) // B}")
print(f"triton.cdiv({N}, {B}) = {triton.cdiv(N, B)}")
print(f"N // B = {N // B}: {N // B} programs cover {N // B * B} elements, "
      f"and {N - N // B * B} are left over")
last = triton.cdiv(N, B) - 1
print(f"program {last} owns indices {last * B}..{last * B + B - 1}; "
      f"the mask keeps {N - last * B} of them (< {N})")

# %%
# Who owns which element (1D)
# ---------------------------
# Each coloured band is one program's block. The last program's block runs past ``N``: the
# hatched part is masked off.

draw_element_owners(N, B)

# %%
# Two dimensions: tiles
# ---------------------
# A matrix is cut into tiles, and the grid gets one axis per dimension:
# ``grid = (cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))``. Inside the kernel, ``tl.program_id(0)``
# says which tile row and ``tl.program_id(1)`` which tile column the program owns. In
# the figure each tile row has its own hue, paler from left to right.
#
# From its two ids a program builds its tile's row and column indices, as in 1D, then
# combines them into a 2D block:
#
# .. code-block:: python
#
#    pid_m = tl.program_id(0)
#    pid_n = tl.program_id(1)
#    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # this tile's BLOCK_M row indices
#    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # and its BLOCK_N column indices
#    offsets = rows[:, None] * stride_m + cols[None, :]  # BLOCK_M x BLOCK_N
#    mask = (rows[:, None] < M) & (cols[None, :] < N)
#
# ``rows[:, None]`` is a column and ``cols[None, :]`` a row; combining them broadcasts to
# the whole tile, one lane per element. The
# :ref:`broadcasting page <sphx_glr_auto_examples_basics_03_broadcasting_2d.py>` explains
# the ``[:, None]`` / ``[None, :]`` pattern and the strides.

M, N2, BLOCK_M, BLOCK_N = 512, 256, 64, 64
grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N2, BLOCK_N))
print(f"a {M} x {N2} matrix in {BLOCK_M} x {BLOCK_N} tiles: grid = {grid}, "
      f"{grid[0]} x {grid[1]} = {grid[0] * grid[1]} programs")
pid_m, pid_n = 2, 1  # one program, worked through the two offset lines with torch.arange
tile_rows = pid_m * BLOCK_M + torch.arange(0, BLOCK_M)
tile_cols = pid_n * BLOCK_N + torch.arange(0, BLOCK_N)
print(f"program ({pid_m}, {pid_n}): rows {tile_rows[0]}..{tile_rows[-1]}, "
      f"columns {tile_cols[0]}..{tile_cols[-1]}; "
      f"rows[:, None] and cols[None, :] broadcast to "
      f"{tuple((tile_rows[:, None] * N2 + tile_cols[None, :]).shape)}")

# %%
# The whole grid, every program in its own colour: a hue per ``program_id(0)``, paler as
# ``program_id(1)`` grows.

draw_tile_owners((M, N2), (BLOCK_M, BLOCK_N))

# %%
# The same with ragged edges: a 500 x 250 matrix still needs 8 x 4 programs, and the tiles
# on the last row and column are partly masked.

rows, cols, tile = 500, 250, 64
ragged_grid = (triton.cdiv(rows, tile), triton.cdiv(cols, tile))
print(f"{rows} x {cols} in {tile} x {tile} tiles: grid = {ragged_grid}")
print(f"the last tile row holds {rows - (ragged_grid[0] - 1) * tile} rows, "
      f"the last tile column {cols - (ragged_grid[1] - 1) * tile} columns")

# %%
# What goes wrong with ``N // B``
# -------------------------------
# Launch the real vector-add kernel with a grid of ``N // B`` programs. Nothing fails: the
# kernel simply never runs for the tail. To see it, fill the output with NaN first
# ("poison" it) and count the elements still NaN afterwards. This is a habit worth keeping
# in every test: ``torch.empty`` may hand back memory that already holds the right answer.
# The last grid has one program more than needed: all its lanes fall past ``N``, so the
# mask switches every one off, and the output comes out the same as with ``cdiv(N, B)``.

n, block = 1000, 64
x = torch.randn(n, device=device)
y = torch.randn(n, device=device)
for name, num in (("N // B", n // block), ("cdiv(N, B)", triton.cdiv(n, block)),
                  ("cdiv(N, B) + 1", triton.cdiv(n, block) + 1)):
    out = torch.full((n,), float("nan"), device=device)
    vector_add_kernel[(num,)](x, y, out, n, BLOCK_SIZE=block)
    unwritten = torch.isnan(out).sum().item()
    correct = torch.isclose(out, x + y).sum().item()
    print(f"grid = {name:<14} -> {num:>2} programs: {correct} elements correct, "
          f"{unwritten} never written")

# %%
# Takeaways
# ---------
# * ``grid = (triton.cdiv(N, BLOCK),)``; for 2D, one ``cdiv`` per axis.
# * The grid rounds up, the mask trims: you need both. Too few programs leave output
#   unwritten; an extra one is masked off entirely.
# * Test with sizes that are not multiples of the block, and poison outputs before checking.
