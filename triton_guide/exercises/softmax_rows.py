"""Softmax of every row: ``out[i] = exp(x[i] - max) / sum(exp(x[i] - max))``.

Write a kernel that computes the softmax of every row of an ``M x N`` matrix, one program
per row, the whole row in one block.

Constraints:

* ``x`` is a float32 matrix of shape ``(M, N)``, possibly a non-contiguous view (use its
  strides, and pass ``x`` itself, not a contiguous copy: the interpreter notices a copy);
  ``out`` is a contiguous float32 matrix of the same shape.
  ``1 <= M <= 10**5``, ``1 <= N <= 4096``, so a row fits in one block of
  ``triton.next_power_of_2(N)`` lanes.
* Values can be large (``|x|`` up to ``10**4``): ``exp(x)`` overflows float32 above 88, so
  subtract the row's maximum first.
* Lanes past the end of the row must change neither the maximum nor the sum: load them as
  ``-inf``.

``solve(x, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import (Case, Mistake, Output, largest, randn, size_between, stored_by_columns,
                      strided)

SUMMARY = "softmax of each row: one block per row, the max subtracted, -inf padding"


def reference(x, M, N):
    return x.softmax(dim=1)


def tolerance(**inputs):
    return 1e-5, 0.0


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False,
          by_columns=False):
    # Clamped to the statement's |x| <= 10**4.
    x = (randn(generator, M, N, scale=scale) + shift).clamp(-1e4, 1e4)
    if non_contiguous:
        x = strided(x)
    if by_columns:
        x = stored_by_columns(x)
    return Case(name, why, {"x": x, "out": Output((M, N)), "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "a 1 x 1 matrix: the softmax of one value is 1", generator, 1, 1),
        _case("tail_of_1", "rows of 1025 in a block of 2048: 1023 padded lanes",
              generator, 3, 1025),
        _case("non_power_of_two", "5 rows of 100", generator, 5, 100),
        _case("many_rows", "300 rows of 20: 300 programs", generator, 300, 20),
        _case("non_contiguous", "x is every 2nd row and 3rd column of a larger matrix",
              generator, 7, 50, non_contiguous=True),
        _case("stored_by_columns", "x is stored column by column (x.stride(1) != 1)",
              generator, 6, 40, by_columns=True),
        _case("all_negative", "every value below zero", generator, 6, 77, shift=-5.0),
        _case("large_values", "values of size up to 1e4: exp(x) overflows without the max",
              generator, 4, 100, scale=1e4),
        _case("near_minus_10000", "every value between -10000 and -9999, the statement's "
              "lowest: padding must be -inf, not a finite stand-in such as -1000 or -1e4",
              generator, 3, 300, scale=0.3, shift=-9999.5),
        _case("longest_rows", "rows of 4096, the longest the statement allows", generator,
              2, 4096),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 20),
              size_between(generator, 1, 2000)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 20), size_between(generator, 1, 2000),
              non_contiguous=True),
    ]


LARGEST = [largest("largest", "M = 10**5 rows of N = 4096, the statement's largest", {
    "x": (10**5, 4096), "out": Output((10**5, 4096)), "M": 10**5, "N": 4096})]


MISTAKES = [
    Mistake("no_max_subtraction", "exp(x) without subtracting the maximum overflows to inf",
            "tl.exp(x - tl.max(x, axis=0))", "tl.exp(x)", "large_values"),
    Mistake("padding_with_zero", "padded lanes load 0 and add exp(0 - max) to the sum",
            'other=-float("inf")', "other=0.0", "tail_of_1"),
    Mistake("load_without_other", "the padded lanes are loaded without other=: undefined "
            "on a GPU, NaN here, and the row's maximum and sum take them in",
            'mask=mask,\n                other=-float("inf"))', "mask=mask)", "tail_of_1",
            reported="a load without other= had masked-off lanes", needs_interpreter=True),
    Mistake("padding_with_minus_1000", "padded lanes load -1000, which looks small enough "
            "but is the row's maximum when every value is near -5000",
            'other=-float("inf")', "other=-1000.0", "near_minus_10000"),
    Mistake("padding_at_minus_1e4", "pads with -1e4, the lowest value the statement allows: "
            "a padded lane then weighs as much as a real value at -1e4",
            'other=-float("inf")', "other=-1e4", "near_minus_10000"),
    Mistake("block_fixed_at_2048", "a fixed block of 2048: rows longer than that lose "
            "their end", "BLOCK_SIZE=triton.next_power_of_2(N)", "BLOCK_SIZE=2048",
            "longest_rows"),
    Mistake("out_with_x_strides", "stores out with x's strides: right while x is contiguous, "
            "past the end of out when it is not",
            "out_ptr + row * N + cols", "out_ptr + row * stride_row + cols * stride_col",
            "non_contiguous", reported="past the end of out"),
]
