"""Row sums: ``out[i] = x[i, :].sum()``, with strides and a loop over long rows.

Write a kernel that sums every row of an ``M x N`` matrix.

Constraints:

* ``x`` is a float32 matrix of shape ``(M, N)`` that may be a non-contiguous view (every
  other row, every third column, a transpose): address element ``(i, j)`` as
  ``x_ptr + i * x.stride(0) + j * x.stride(1)``; never assume ``x.stride(0) == N``, and
  pass ``x`` itself, not a contiguous copy (the interpreter notices a copy).
* ``1 <= M <= 10**5`` and ``1 <= N <= 10**6``: a row may be longer than any block you can
  hold, so each program walks its row block by block and adds as it goes. Every
  element's offset ``i * x.stride(0) + j * x.stride(1)`` is below ``2**31``, so int32
  offsets suffice (past that, see the common-mistakes page on 64-bit offsets).
* ``out`` is a contiguous float32 vector of ``M`` elements. Accumulate in float32.
* Load the masked-off lanes with ``other=0.0``: without ``other=`` they are undefined on a
  GPU (the checker's interpreter runs make them NaN).

``solve(x, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import (Case, Mistake, Output, largest, randn, size_between, stored_by_columns,
                      strided)

SUMMARY = "out[i] = sum of row i: one program per row, a loop over blocks, strides"


def reference(x, M, N):
    return x.sum(dim=1)


def tolerance(x, M, N):
    # float32 sums of N terms, added in a different order than the float64 reference.
    return 1e-5, 1e-6 * x.abs().sum(dim=1).max().item()


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False,
          by_columns=False):
    x = randn(generator, M, N, scale=scale) + shift
    if non_contiguous:
        x = strided(x)
    if by_columns:
        x = stored_by_columns(x)
    return Case(name, why, {"x": x, "out": Output((M,)), "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "a 1 x 1 matrix", generator, 1, 1),
        _case("tail_of_1", "rows of 1025: the last block of each row holds one element",
              generator, 3, 1025),
        _case("non_power_of_two", "5 rows of 100", generator, 5, 100),
        _case("larger_than_one_block", "rows of 5000: several blocks per row", generator, 4,
              5000),
        _case("long_rows", "2 rows of 40000: more than any single block holds", generator, 2,
              40_000),
        _case("non_contiguous", "x is every 2nd row and every 3rd column of a larger matrix",
              generator, 6, 300, non_contiguous=True),
        _case("stored_by_columns", "x is stored column by column (x.stride(1) != 1)",
              generator, 5, 70, by_columns=True),
        _case("all_negative", "every value below zero", generator, 7, 333, shift=-5.0),
        _case("large_values", "values near 1e30", generator, 3, 700, scale=1e30),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 8),
              size_between(generator, 1, 3000)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 8), size_between(generator, 1, 3000),
              non_contiguous=True),
    ]


# The statement's largest sizes, each with every offset below 2**31.
LARGEST = [
    largest("most_rows", "M = 10**5 rows of 21474 (offsets below 2**31)", {
        "x": (10**5, 21474), "out": Output((10**5,)), "M": 10**5, "N": 21474}),
    largest("longest_rows", "N = 10**6: 2147 rows of a million", {
        "x": (2147, 10**6), "out": Output((2147,)), "M": 2147, "N": 10**6}),
]


MISTAKES = [
    Mistake("contiguous_rows", "assumes row i starts at i * N and columns are adjacent",
            "x.stride(0), x.stride(1)", "N, 1", "non_contiguous",
            reported="between the elements of x"),
    Mistake("load_without_mask", "the loop's last block reads past the end of the row",
            "tl.load(row_start + cols * stride_col, mask=mask, other=0.0)",
            "tl.load(row_start + cols * stride_col)", "tail_of_1"),
    Mistake("mask_without_other", "the masked-off lanes are loaded without other=0.0: "
            "undefined on a GPU, added into the sum",
            "mask=mask, other=0.0)", "mask=mask)", "tail_of_1",
            reported="The NaN of a masked-off lane: a tl.load with a mask and no other=",
            needs_interpreter=True),
    Mistake("contiguous_copy", "solve hands the kernel x.contiguous(): right, but a whole "
            "extra pass over memory, and the strides never practised",
            "    row_sum_kernel[(M,)](", "    x = x.contiguous()\n    row_sum_kernel[(M,)](",
            "non_contiguous", reported="never read x itself",
            needs_interpreter=True),
]
