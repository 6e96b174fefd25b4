"""Column maxima: ``out[j] = max over i of x[i, j]``, with ``-inf`` padding.

Write a kernel that takes the maximum of every column of an ``M x N`` matrix.

Constraints:

* ``x`` is a float32 matrix of shape ``(M, N)``, possibly a non-contiguous view: use
  ``x.stride(0)`` and ``x.stride(1)``. ``1 <= M, N <= 10**5``, and every element's offset
  ``i * x.stride(0) + j * x.stride(1)`` is below ``2**31`` (so int32 offsets suffice).
* Each program owns a block of columns and walks down the rows a tile at a time. Lanes
  outside the matrix must not win the maximum: load them as ``-inf`` (``other=``). Not 0,
  or a column of negative numbers comes out as 0; nor a large finite negative, as values
  go down to ``-3e38``.
* ``out`` is a contiguous float32 vector of ``N`` elements.

``solve(x, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import (Case, Mistake, Output, largest, randn, size_between, stored_by_columns,
                      strided)

SUMMARY = "out[j] = max of column j: 2-D tiles, a loop down the rows, -inf padding"


def reference(x, M, N):
    return x.amax(dim=0)


def tolerance(**inputs):
    return 0.0, 0.0


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False,
          by_columns=False):
    # Clamped to what the statement allows (finite float32 down to -3e38).
    x = (randn(generator, M, N, scale=scale) + shift).clamp(-3e38, 3e38)
    if non_contiguous:
        x = strided(x)
    if by_columns:
        x = stored_by_columns(x)
    return Case(name, why, {"x": x, "out": Output((N,)), "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "a 1 x 1 matrix", generator, 1, 1),
        _case("tail_of_1", "65 rows and 129 columns: one row and one column past a block "
              "of up to 64 and 128", generator, 65, 129),
        _case("non_power_of_two", "100 x 37", generator, 100, 37),
        _case("larger_than_one_block", "300 x 300: several column blocks and row tiles",
              generator, 300, 300),
        _case("tall", "3000 rows of 3: more rows than any single tile holds", generator,
              3000, 3),
        _case("non_contiguous", "x is every 2nd row and every 3rd column of a larger matrix",
              generator, 50, 70, non_contiguous=True),
        _case("stored_by_columns", "x is stored column by column (x.stride(1) != 1)",
              generator, 40, 30, by_columns=True),
        _case("all_negative", "every value below zero, 37 rows (a partial row tile)",
              generator, 37, 50, shift=-5.0),
        _case("large_values", "values near +-1e30", generator, 40, 30, scale=1e30),
        _case("below_minus_1e37", "every value near -1e38: padding with a finite stand-in "
              "for -inf, such as -1e9, wins the maximum", generator, 37, 20, scale=1e37,
              shift=-1e38),
        _case("below_minus_2e38", "every value between -3e38 and -2e38: even -1e38 as "
              "padding wins the maximum", generator, 37, 20, scale=1.5e37, shift=-2.5e38),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 200),
              size_between(generator, 1, 200)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 200), size_between(generator, 1, 200),
              non_contiguous=True),
    ]


# The statement's largest sizes, each with every offset below 2**31.
LARGEST = [
    largest("most_rows", "M = 10**5 rows of 21474 columns (offsets below 2**31)", {
        "x": (10**5, 21474), "out": Output((21474,)), "M": 10**5, "N": 21474}),
    largest("most_columns", "N = 10**5 columns of 21474 rows (offsets below 2**31)", {
        "x": (21474, 10**5), "out": Output((10**5,)), "M": 21474, "N": 10**5}),
]


MISTAKES = [
    Mistake("padding_with_zero", "masked-off lanes load 0, which beats every negative value",
            'tile = tl.load(pointers, mask=mask, other=-float("inf"))',
            "tile = tl.load(pointers, mask=mask, other=0.0)", "all_negative",
            reported="a 0 that won a maximum"),
    Mistake("contiguous_rows", "assumes row i starts at i * N and columns are adjacent",
            "x.stride(0), x.stride(1)", "N, 1", "non_contiguous"),
    Mistake("load_without_mask", "the tile is loaded without a mask: the last tiles read "
            "past the end of x, and a NaN read there loses every maximum it meets",
            'tile = tl.load(pointers, mask=mask, other=-float("inf"))',
            "tile = tl.load(pointers)", "n=1", reported="past the end of x"),
    Mistake("mask_without_other", "the tile is masked but has no other=: on a GPU the "
            "masked-off lanes hold whatever the registers held, and can win the maximum "
            "(the interpreter reads NaN there, which tl.max skips, so the checker runs the "
            "case again with 3e38 in those lanes)",
            'tile = tl.load(pointers, mask=mask, other=-float("inf"))',
            "tile = tl.load(pointers, mask=mask)", "n=1",
            reported="does a masked load need other=", needs_interpreter=True),
    Mistake("padding_with_minus_1e9", "masked-off lanes load -1e9, a finite stand-in for -inf "
            "that beats a column of values near -1e38",
            'other=-float("inf")', "other=-1e9", "below_minus_1e37"),
    Mistake("padding_at_minus_1e38", "pads with -1e38, a large finite negative: columns "
            "whose values are all below it come out as -1e38",
            'other=-float("inf")', "other=-1e38", "below_minus_2e38"),
]
