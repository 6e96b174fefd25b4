"""Online log-sum-exp: ``out[i] = log(sum_j exp(x[i, j]))`` in one pass over long rows.

Write a kernel that computes the log-sum-exp of every row of an ``M x N`` matrix, reading
each row once, block by block, however long it is (the interpreter counts the reads: a
second pass over a row fails).

Constraints:

* ``x`` is a float32 matrix of shape ``(M, N)``, possibly a non-contiguous view (use its
  strides); ``out`` is a contiguous float32 vector of ``M``. ``1 <= M <= 10**5``,
  ``1 <= N <= 10**6``: a row does not fit in one block. Every element's offset is below
  ``2**31`` (so int32 offsets suffice).
* ``logsumexp(x) = m + log(sum exp(x - m))`` for the row maximum ``m``; values reach
  ``|x| = 10**4``, so the shift is needed both ways (``exp(10**4)`` overflows,
  ``exp(-10**4)`` underflows to 0 and ``log(0) = -inf``).
* You do not know ``m`` until the row ends. Keep a running maximum and a running sum, and
  when the maximum grows from ``m`` to ``m'``, rescale the sum by ``exp(m - m')``.
* Values may be ``-inf`` (masked out, as attention scores can be): whole blocks of a
  row, or a whole row. A row of only ``-inf`` has log-sum-exp ``-inf``, and a row whose
  first blocks are ``-inf`` has the log-sum-exp of its other values: not NaN, so beware
  ``-inf - (-inf)`` while the running maximum is still ``-inf``.

``solve(x, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

import torch

from .cases import (Case, Mistake, Output, largest, randn, size_between, stored_by_columns,
                      strided)

SUMMARY = "out[i] = logsumexp of row i: running max and rescaled running sum, one pass"
# The interpreter counts the reads of every element of x: one pass reads each once.
READ_ONCE = ("x",)


def reference(x, M, N):
    return torch.logsumexp(x, dim=1)


def tolerance(**inputs):
    return 1e-5, 0.0


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False,
          by_columns=False,
          ascending=False, row_of_neg_inf=False, leading_neg_inf=0):
    # Clamped to the statement's |x| <= 10**4.
    x = (randn(generator, M, N, scale=scale) + shift).clamp(-1e4, 1e4)
    if ascending:
        x = x.sort(dim=1).values
    if row_of_neg_inf:
        x[M // 2] = -float("inf")
    x[:, :leading_neg_inf] = -float("inf")
    if non_contiguous:
        x = strided(x)
    if by_columns:
        x = stored_by_columns(x)
    return Case(name, why, {"x": x, "out": Output((M,)), "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "a 1 x 1 matrix", generator, 1, 1),
        _case("tail_of_1", "rows of 1025: the last block of each row holds one element",
              generator, 2, 1025),
        _case("non_power_of_two", "3 rows of 100", generator, 3, 100),
        _case("larger_than_one_block", "rows of 5000: several blocks per row", generator, 3,
              5000),
        _case("ascending_rows", "each row sorted ascending, 3000 long: the maximum grows in "
              "every block, so the running sum must be rescaled", generator, 2, 3000,
              ascending=True),
        _case("ascending_across_the_range", "each row sorted ascending from about -1e4 to "
              "1e4: a sum shifted by an early block's maximum and never rescaled overflows",
              generator, 2, 3000, scale=3333.0, ascending=True),
        _case("non_contiguous", "x is every 2nd row and 3rd column of a larger matrix",
              generator, 5, 300, non_contiguous=True),
        _case("stored_by_columns", "x is stored column by column (x.stride(1) != 1)",
              generator, 5, 70, by_columns=True),
        _case("all_negative", "values near -1e4: exp(x) underflows to 0 without the shift",
              generator, 3, 500, shift=-1e4),
        _case("large_values", "values near 1e4: exp(x) overflows without the shift",
              generator, 3, 500, shift=1e4),
        _case("row_of_neg_inf", "the middle row is all -inf: its answer is -inf, not NaN",
              generator, 3, 200, row_of_neg_inf=True),
        _case("leading_neg_inf", "the first 2500 values of every row are -inf (masked "
              "out, as attention scores can be), the rest finite: whole blocks hold no "
              "number yet", generator, 2, 3000, leading_neg_inf=2500),
        _case("long_rows", "one row of 40000: many blocks, more than any single block holds",
              generator, 1, 40_000),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 6),
              size_between(generator, 1, 4000)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 6), size_between(generator, 1, 4000),
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
    Mistake("sum_not_rescaled", "the running sum is not rescaled when the maximum grows",
            "lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)",
            "lane_sum = lane_sum + tl.exp(x - shift)", "ascending_rows"),
    Mistake("padding_with_zero", "padded lanes load 0, and exp(0 - max) is huge when every "
            "value is near -1e4", 'other=-float("inf")', "other=0.0", "all_negative"),
]
