"""Persistent matrix product: the tiled ``c = a @ b`` on a fixed grid of programs, each
looping over tiles.

The tiled matmul launches one program per output tile. A persistent kernel launches a
fixed number of programs instead, ``num_programs`` (on a GPU, one per SM: every program
starts at once, and none waits for a slot), and each program loops over the tiles
``tile = pid, pid + num_programs, pid + 2 * num_programs, ...`` up to the number of tiles.
Turn the tiled matmul into one:

* launch a 1-D grid of ``num_programs`` programs (``(min(num_programs, tiles),)`` is
  accepted too: programs past the last tile have nothing to do). ``tl.num_programs(0)``
  gives the step inside the kernel;
* keep the lesson's grouped tile order: tile number ``tile`` becomes a tile row and column
  through the grouped arithmetic (``GROUP_SIZE_M`` tile rows per group), so that the
  programs running together share tiles of ``a`` and ``b``;
* each program computes each of its tiles as the tiled matmul does (a float32
  accumulator, zeroed for every tile, a loop over ``K`` with ``tl.dot``, masked ragged
  edges) and stores it into ``c`` once.

Constraints:

* ``a`` (``M x K``) and ``b`` (``K x N``) are float32 matrices, possibly non-contiguous
  views: use their strides. ``c`` is a contiguous float32 ``M x N`` matrix.
  ``1 <= M, N, K <= 4096``, in general not multiples of the block sizes.
  ``1 <= num_programs <= 1024``: the checker passes small numbers (1 to 8) so that each
  program takes several tiles, or none, and on a GPU also the GPU's SM count.
* Name the kernel's block sizes ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K`` and its group
  ``GROUP_SIZE_M`` (all ``tl.constexpr``): the checker reads them from the launch to work
  out which program owns each tile. Blocks of 16 or more suit ``tl.dot`` everywhere; the
  interpreter multiplies float32 exactly, a GPU rounds it to tf32 (a relative error of a
  few 1e-2 is allowed there).
* Pass ``num_programs`` to the kernel as an ordinary argument, or not at all
  (``tl.num_programs(0)``): as a ``tl.constexpr`` every new value compiles a new kernel.

The checker fails a launch of any other grid (one program per tile gives the right
product, and is not persistent), more than one launch, and, in the interpreter, a tile
stored by a program other than its owner (``tile % num_programs``) or stored twice.

``solve(a, b, c, M, N, K, num_programs)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import hardware, runtime
from ..testing import tolerance as dtype_tolerance
from .cases import Case, CaseResult, Mistake, Output, largest, randn, size_between, strided

EXACT_DOT = True  # the statement asks for tl.dot and says the interpreter multiplies exactly
WRITE_ONCE = ("c",)  # each element of c is stored once (checked in the interpreter)
SUMMARY = "c = a @ b on a fixed grid: each program loops over tiles in grouped order"

# The names the statement gives the kernel's tile shape and group.
TILE_NAMES = ("BLOCK_M", "BLOCK_N", "GROUP_SIZE_M")


def reference(a, b, M, N, K, num_programs):
    return a @ b


def tolerance(**inputs):
    # The statement's kernel calls tl.dot with Triton's default input_precision, "tf32".
    return dtype_tolerance(torch.float32, tensor_cores=True, input_precision="tf32"), 0.0


def _case(name, why, generator, M, N, K, num_programs, *, scale=1.0, shift=0.0,
          non_contiguous=False):
    a = randn(generator, M, K, scale=scale) + shift
    b = randn(generator, K, N, scale=scale) + shift
    if non_contiguous:
        a, b = a.t().contiguous().t(), strided(b)  # a column-major, b a slice
    return Case(name, why, {"a": a, "b": b, "c": Output((M, N)), "M": M, "N": N, "K": K,
                            "num_programs": num_programs})


def _processors() -> int:
    """The SM count of the GPU the kernels run on; in the interpreter, 6."""
    device = runtime.device()
    return hardware.multiprocessors(device) if device.type == "cuda" else 6


def cases(generator):
    sms = _processors()
    side = int(np.ceil(np.sqrt(1.5 * sms))) * 32 - 7  # about 1.5 tiles of 32 x 32 per SM
    return [
        _case("n=1", "1 x 1 times 1 x 1 on 3 programs: one tile, two programs with none",
              generator, 1, 1, 1, 3),
        _case("tail_of_1", "M = N = K = 65 on 3 programs: 9 tiles of 32, 3 per program",
              generator, 65, 65, 65, 3),
        _case("non_power_of_two", "37 x 23 times 23 x 50 on 3 programs", generator, 37, 50,
              23, 3),
        _case("fewer_tiles_than_programs", "40 x 30 times 30 x 50 on 7 programs: 4 tiles "
              "of 32, 3 programs with none", generator, 40, 50, 30, 7),
        _case("one_program", "70 x 20 times 20 x 45 on 1 program: it takes every tile",
              generator, 70, 45, 20, 1),
        _case("last_wave_partial", "100 x 130 times 130 x 90 on 5 programs: 12 tiles of 32, "
              "the third round of tiles has 2", generator, 100, 90, 130, 5),
        _case("deep", "5 x 300 times 300 x 7 on 2 programs: K past any single block",
              generator, 5, 7, 300, 2),
        _case("non_contiguous", "a is column-major, b every 2nd row and 3rd column of a "
              "larger matrix, on 3 programs", generator, 40, 33, 50, 3,
              non_contiguous=True),
        _case("all_negative", "every value below zero, on 4 programs", generator, 50, 70,
              40, 4, shift=-2.0),
        _case("large_values", "values near 1e10: products near 1e20, on 4 programs",
              generator, 50, 70, 40, 4, scale=1e10),
        _case("random", "random M, N, K and num_programs", generator,
              size_between(generator, 1, 100), size_between(generator, 1, 100),
              size_between(generator, 1, 80), size_between(generator, 1, 8)),
        _case("one_per_sm", f"num_programs = {sms}, "
              + ("this GPU's SM count" if runtime.device().type == "cuda" else
                 "as an interpreter's stand-in for a GPU's SM count")
              + f", with a {side} x {side} output: about 1.5 tiles of 32 x 32 per program",
              generator, side, side, 40, sms),
    ]


LARGEST = [largest("largest", "M = N = K = 4096 on 132 programs (an H100's SMs), the "
                   "statement's largest", {
                       "a": (4096, 4096), "b": (4096, 4096), "c": Output((4096, 4096)),
                       "M": 4096, "N": 4096, "K": 4096, "num_programs": 132})]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_numbers(M: int, N: int, block_m: int, block_n: int, group: int) -> np.ndarray:
    """The ``(tile rows, tile columns)`` array of each tile's number in grouped order (the
    inverse of the lesson's :func:`triton_guide.matmul.tile_of_program`)."""
    rows, columns = _cdiv(M, block_m), _cdiv(N, block_n)
    tile = np.arange(rows * columns)
    per_group = group * columns
    first_row = tile // per_group * group
    group_rows = np.minimum(rows - first_row, group)
    numbers = np.empty((rows, columns), np.int64)
    numbers[first_row + tile % per_group % group_rows, tile % per_group // group_rows] = tile
    return numbers


def _failure(case, summary, *details):
    return CaseResult(case, False, summary, list(details))


def launch_rules(case: Case, launches, stored_by: np.ndarray | None) -> CaseResult | None:
    """The failure, if ``solve`` did not launch one persistent kernel as the statement asks.

    ``launches`` are what solve launched; ``stored_by``, in the interpreter, the program
    that stored each element of ``c`` in the last launch (-1 where none did), else None.
    """
    M, N, programs = case.arguments["M"], case.arguments["N"], case.arguments["num_programs"]
    if len(launches) != 1:
        return _failure(case, f"launched {len(launches)} kernels", (
            f"solve launched {', '.join(launch.kernel for launch in launches)}: the exercise "
            "asks for one launch of the persistent kernel, which computes every tile."))
    launch = launches[0]
    sizes = dict(launch.constexprs)
    known = all(isinstance(sizes.get(name), int) for name in TILE_NAMES)
    tiles = (_cdiv(M, sizes["BLOCK_M"]) * _cdiv(N, sizes["BLOCK_N"])
             if all(isinstance(sizes.get(name), int) for name in TILE_NAMES[:2]) else None)
    allowed = {programs} if tiles is None else {programs, min(programs, tiles)}
    grid = launch.grid
    if grid is not None:
        size = int(np.prod(grid))
        if any(extent != 1 for extent in grid[1:]) or size not in allowed:
            per_tile = tiles is not None and size >= tiles > programs
            summary = (f"launched one program per tile, grid {grid}" if per_tile else
                       f"launched the grid {grid}")
            why = ("one program per tile, as the tiled matmul does, so that each program's "
                   "loop runs once, if it loops at all. " if per_tile else
                   "more programs than num_programs. " if size > programs else "")
            return _failure(case, f"{summary}, not ({programs},)", (
                f"{launch.kernel} was launched on the grid {grid} with num_programs="
                f"{programs}" + (f" and {tiles} tiles" if tiles is not None else "") + ": "
                + why + "A persistent kernel launches a 1-D grid of num_programs programs "
                "(or min(num_programs, tiles)), and program pid loops over the tiles pid, "
                "pid + num_programs, ... On a GPU num_programs is the SM count, so that "
                "every program runs at once and the tiles are shared out evenly."))
    if stored_by is None:
        return None  # on a GPU: which program stored what is not seen
    if not known and tiles is not None and 1 in (_cdiv(M, sizes["BLOCK_M"]),
                                                 _cdiv(N, sizes["BLOCK_N"])):
        # With one tile row or one tile column, every group size gives the same order.
        sizes["GROUP_SIZE_M"], known = 1, True
    if not known:
        return _failure(case, "kernel without BLOCK_M, BLOCK_N and GROUP_SIZE_M", (
            f"{launch.kernel} takes no integer tl.constexpr named "
            f"{', '.join(name for name in TILE_NAMES if not isinstance(sizes.get(name), int))}"
            ": the checker reads the tile shape and the group from those names (the "
            "statement's) to work out which program owns each tile."))
    block_m, block_n, group = (sizes[name] for name in TILE_NAMES)
    numbers = tile_numbers(M, N, block_m, block_n, group)
    owner = (numbers % programs).repeat(block_m, 0).repeat(block_n, 1)[:M, :N]
    wrong = np.argwhere(stored_by != owner)
    if not len(wrong):
        return None
    row, column = (int(i) for i in wrong[0])
    tile_row, tile_column = row // block_m, column // block_n
    tile = int(numbers[tile_row, tile_column])
    got = int(stored_by[row, column])
    by = "no program of the launch" if got < 0 else f"program {got}"
    return _failure(case, f"tile {tile} stored by {by}, not program {tile % programs}", (
        f"The tile of c at tile row {tile_row} and tile column {tile_column} (elements "
        f"from ({tile_row * block_m}, {tile_column * block_n})) is tile {tile} in grouped "
        f"order with BLOCK_M={block_m}, BLOCK_N={block_n}, GROUP_SIZE_M={group}; with "
        f"num_programs={programs}, program {tile % programs} owns it (tile % num_programs), "
        f"and {by} stored it ({int((stored_by != owner).sum())} elements of c stored by "
        "another program than their owner)."),
        "Check the loop: for tile in range(pid, num_tiles, num_programs), and that the "
        "tile number goes through the grouped order (tile rows first, GROUP_SIZE_M of "
        "them at a time) before it becomes the tile's row and column.")


MISTAKES = [
    Mistake("one_tile_per_program", "the grid has one program per tile: each program's "
            "loop runs once, the product comes out right, and the kernel is the tiled "
            "matmul again", "grid = (num_programs,)",
            "grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)", "tail_of_1",
            reported="one program per tile"),
    Mistake("row_major_order", "the tiles are numbered row by row, not in groups of tile "
            "rows: the product is right and the programs running together no longer share "
            "tiles of b", "pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, "
            "GROUP_SIZE_M)", "pid_m, pid_n = tile // tl.cdiv(N, BLOCK_N), tile % "
            "tl.cdiv(N, BLOCK_N)", "tail_of_1", reported="grouped order",
            needs_interpreter=True),
    Mistake("step_of_one", "each program loops from its own first tile to the last one "
            "with a step of 1: every tile past the first few is computed and stored by "
            "several programs, which a GPU hides (they store the same values)",
            "range(pid, num_tiles, tl.num_programs(0))", "range(pid, num_tiles)",
            "tail_of_1", reported="more than once", needs_interpreter=True),
    Mistake("tiles_rounded_down", "the number of tiles uses M // BLOCK_M and N // BLOCK_N, "
            "which drops the ragged tiles", "num_tiles = tl.cdiv(M, BLOCK_M) * "
            "tl.cdiv(N, BLOCK_N)", "num_tiles = (M // BLOCK_M) * (N // BLOCK_N)", "n=1"),
    Mistake("contiguous_b", "assumes b is contiguous (row k at k * N)",
            "b.stride(0), b.stride(1)", "N, 1", "non_contiguous"),
]
