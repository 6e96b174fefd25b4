"""Matrix-vector product: ``out = a @ x``, a 2-D tile reduced along one axis.

Write a kernel that multiplies an ``M x K`` matrix by a vector of ``K`` elements.

Constraints:

* ``a`` is a float32 matrix of shape ``(M, K)``, possibly a non-contiguous view: use
  ``a.stride(0)`` and ``a.stride(1)``. ``x`` is a contiguous float32 vector of ``K``
  elements; ``out`` a contiguous float32 vector of ``M``. ``1 <= M, K <= 10**5``, and
  every element's offset in ``a`` is below ``2**31`` (so int32 offsets suffice).
* Each program owns ``BLOCK_M`` rows and walks along ``K`` a ``(BLOCK_M, BLOCK_K)`` tile at a
  time: multiply the tile by the matching piece of ``x`` broadcast over the rows, and sum
  along ``axis=1``. Accumulate in float32.
* Mask the rows and the columns: the last ``K`` block reaches past the end of ``x`` and of
  every row.

``solve(a, x, out, M, K)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import (Case, Mistake, Output, largest, randn, size_between, stored_by_columns,
                      strided)

SUMMARY = "out = a @ x: (BLOCK_M, BLOCK_K) tiles, a loop over K, tl.sum(axis=1)"


def reference(a, x, M, K):
    return a @ x


def tolerance(a, x, M, K):
    # float32 sums of K products, in another order than the float64 reference.
    return 1e-5, 1e-6 * (a.abs() @ x.abs()).max().item()


def _case(name, why, generator, M, K, *, scale=1.0, shift=0.0, non_contiguous=False,
          by_columns=False):
    a = randn(generator, M, K, scale=scale) + shift
    x = randn(generator, K, scale=scale) + shift
    if non_contiguous:
        a = strided(a)
    if by_columns:
        a = stored_by_columns(a)
    return Case(name, why, {"a": a, "x": x, "out": Output((M,)), "M": M, "K": K})


def cases(generator):
    return [
        _case("n=1", "1 x 1 times 1", generator, 1, 1),
        _case("tail_of_1", "17 x 1025: one row and one column past blocks of up to 16 and "
              "1024", generator, 17, 1025),
        _case("non_power_of_two", "37 x 100", generator, 37, 100),
        _case("larger_than_one_block", "40 x 1500: several row blocks and K blocks",
              generator, 40, 1500),
        _case("non_contiguous", "a is every 2nd row and 3rd column of a larger matrix",
              generator, 30, 200, non_contiguous=True),
        _case("stored_by_columns", "a is stored column by column (a.stride(1) != 1)",
              generator, 30, 50, by_columns=True),
        _case("all_negative", "every value below zero", generator, 37, 50, shift=-5.0),
        _case("large_values", "values near 1e15: products near 1e30", generator, 20, 300,
              scale=1e15),
        _case("long_rows", "2 x 40000: K far past any single block", generator, 2, 40_000),
        _case("random_1", "random M and K", generator, size_between(generator, 1, 50),
              size_between(generator, 1, 1000)),
        _case("random_2", "random M and K, non-contiguous", generator,
              size_between(generator, 1, 50), size_between(generator, 1, 1000),
              non_contiguous=True),
    ]


# The statement's largest sizes, each with every offset below 2**31.
LARGEST = [
    largest("most_rows", "M = 10**5 rows of 21474 (offsets below 2**31)", {
        "a": (10**5, 21474), "x": (21474,), "out": Output((10**5,)), "M": 10**5, "K": 21474}),
    largest("longest_rows", "K = 10**5: 21474 rows of 10**5 (offsets below 2**31)", {
        "a": (21474, 10**5), "x": (10**5,), "out": Output((21474,)), "M": 21474, "K": 10**5}),
]


MISTAKES = [
    Mistake("x_load_without_mask", "the last K block of x is loaded without its mask and "
            "reads past the end of x",
            "tl.load(x_ptr + ks, mask=k_mask, other=0.0)", "tl.load(x_ptr + ks)", "tail_of_1",
            reported="past the end of x"),
    Mistake("contiguous_rows", "assumes row i of a starts at i * K",
            "a.stride(0), a.stride(1)", "K, 1", "non_contiguous"),
    Mistake("a_load_without_row_mask", "the tile of a is masked along K only: the rows past M "
            "of the last row block read past the end of a (the store drops them)",
            "mask=row_mask[:, None] & k_mask[None, :], other=0.0",
            "mask=k_mask[None, :], other=0.0", "n=1", reported="past the end of a",
            needs_interpreter=True),
    Mistake("tf32_dot", "the tile times x through tl.dot (x repeated into 16 columns): a "
            "GPU rounds float32 operands of tl.dot to tf32, far from float32's accuracy",
            "tl.sum(tile * x[None, :], axis=1)",
            "tl.max(tl.dot(tile, tl.broadcast_to(x[:, None], (BLOCK_K, 16))), axis=1)",
            "non_power_of_two", reported="tf32"),
    Mistake("x_as_a_column", "x is broadcast as a column, (BLOCK_K, 1), against a tile of "
            "(BLOCK_M, BLOCK_K): the shapes do not combine, and the report names the line",
            "tile * x[None, :]", "tile * x[:, None]", "n=1",
            reported=": total += tl.sum(tile * x[:, None], axis=1)", needs_interpreter=True),
]
