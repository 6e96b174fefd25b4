"""Outer product: ``out[i, j] = x[i] * y[j]``, a 2-D grid and broadcasting.

Write a kernel that fills an ``M x N`` matrix with the products of two vectors.

Constraints:

* ``x`` (``M`` elements) and ``y`` (``N`` elements) are float32 vectors that may be strided
  views (every other element of a longer vector): address them with ``x.stride(0)`` and
  ``y.stride(0)``. ``1 <= M, N <= 10**4``.
* ``out`` is a contiguous float32 matrix of shape ``(M, N)``: element ``(i, j)`` is at
  ``i * N + j``.
* Launch a 2-D grid of ``(BLOCK_M, BLOCK_N)`` tiles; build the tile with ``[:, None]`` and
  ``[None, :]``, and mask both the rows and the columns of the store.

``solve(x, y, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import Case, Mistake, Output, largest, randn, size_between, strided

# The statement asks for a 2-D grid of tiles (checked on every launch).
GRID_DIMS = 2
SUMMARY = "out[i, j] = x[i] * y[j]: a 2-D grid, [:, None] and [None, :]"


def reference(x, y, M, N):
    return x[:, None] * y[None, :]


def tolerance(**inputs):
    return 1e-6, 0.0


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False):
    x = randn(generator, M, scale=scale) + shift
    y = randn(generator, N, scale=scale) + shift
    if non_contiguous:
        x, y = strided(x, 2), strided(y, 3)
    return Case(name, why, {"x": x, "y": y, "out": Output((M, N)), "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "1 x 1", generator, 1, 1),
        _case("tail_of_1", "65 x 33: one row and one column past blocks of up to 64 and 32",
              generator, 65, 33),
        _case("non_power_of_two", "100 x 37", generator, 100, 37),
        _case("larger_than_one_block", "200 x 300: many tiles each way", generator, 200, 300),
        _case("wide", "3 x 2100: more columns than a block of up to 2048 holds", generator,
              3, 2100),
        _case("non_contiguous", "x is every 2nd element of a longer vector, y every 3rd",
              generator, 50, 70, non_contiguous=True),
        _case("all_negative", "every x and y below zero", generator, 37, 50, shift=-5.0),
        _case("large_values", "values near 1e15: products near 1e30", generator, 40, 30,
              scale=1e15),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 200),
              size_between(generator, 1, 200)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 200), size_between(generator, 1, 200),
              non_contiguous=True),
    ]


LARGEST = [largest("largest", "M = N = 10**4, the statement's largest", {
    "x": (10**4,), "y": (10**4,), "out": Output((10**4, 10**4)), "M": 10**4, "N": 10**4})]


MISTAKES = [
    Mistake("store_masks_rows_only", "the store masks rows but not columns: the last column "
            "tile runs into the next row and, in the last row, past the end",
            "mask = (rows[:, None] < M) & (cols[None, :] < N)", "mask = rows[:, None] < M",
            "n=1"),
    Mistake("unit_stride_x", "reads x as if it were contiguous",
            "x.stride(0), y.stride(0)", "1, y.stride(0)", "non_contiguous"),
    Mistake("tile_transposed", "x along the columns and y down the rows: for square tiles "
            "it still broadcasts, to the transposed tile",
            "x[:, None] * y[None, :], mask=mask", "x[None, :] * y[:, None], mask=mask",
            "tail_of_1", reported="which other= alone would not fix"),
]
