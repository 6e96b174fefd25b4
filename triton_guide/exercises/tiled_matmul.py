"""Tiled matrix product: ``c = a @ b`` with ``tl.dot``, for sizes no tile divides.

Write a kernel in which every program computes one ``(BLOCK_M, BLOCK_N)`` tile of ``c``,
looping over ``K`` a ``BLOCK_K`` slice at a time and multiplying tiles with ``tl.dot``.

Constraints:

* ``a`` (``M x K``) and ``b`` (``K x N``) are float32 matrices, possibly non-contiguous
  views: use their strides. ``c`` is a contiguous float32 ``M x N`` matrix.
  ``1 <= M, N, K <= 4096``, in general not multiples of the block sizes: mask the ragged
  edges of ``M``, ``N`` and ``K`` (masked lanes of ``a`` and ``b`` read 0, which adds
  nothing to the dot product).
* ``tl.dot`` sets a lower bound on the block sizes that depends on the Triton version and
  the GPU: Triton 3.9 on an NVIDIA GPU wants ``BLOCK_K`` of at least 8 for float32 (16 for
  16-bit inputs), older versions wanted 16 on every side, and the interpreter takes any.
  Blocks of 16 or more are safe everywhere. Accumulate in float32. On a GPU ``tl.dot``
  rounds float32 inputs to tf32, so the checker allows a relative error of a few 1e-2
  there; the interpreter multiplies exactly.

``solve(a, b, c, M, N, K)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

import torch

from ..testing import tolerance as dtype_tolerance
from .cases import Case, Mistake, Output, largest, randn, size_between, strided

# The statement asks for a 2-D grid of tiles (checked on every launch).
GRID_DIMS = 2
# In the interpreter tl.dot multiplies float32 exactly, as the statement says, so that the
# tolerance there stays float32's and catches small mistakes; a GPU rounds to tf32.
EXACT_DOT = True
SUMMARY = "c = a @ b: a 2-D grid of tiles, a loop over K, tl.dot, ragged edges"


def reference(a, b, M, N, K):
    return a @ b


def tolerance(**inputs):
    # The statement's kernel calls tl.dot with Triton's default input_precision, "tf32".
    return dtype_tolerance(torch.float32, tensor_cores=True, input_precision="tf32"), 0.0


def _case(name, why, generator, M, N, K, *, scale=1.0, shift=0.0, non_contiguous=False):
    a = randn(generator, M, K, scale=scale) + shift
    b = randn(generator, K, N, scale=scale) + shift
    if non_contiguous:
        a, b = a.t().contiguous().t(), strided(b)  # a column-major, b a slice
    return Case(name, why, {"a": a, "b": b, "c": Output((M, N)), "M": M, "N": N, "K": K})


def cases(generator):
    return [
        _case("n=1", "1 x 1 times 1 x 1: every tile almost all padding", generator, 1, 1, 1),
        _case("tail_of_1", "M = N = K = 65: one past blocks of up to 64 in every dimension",
              generator, 65, 65, 65),
        _case("non_power_of_two", "37 x 23 times 23 x 50", generator, 37, 50, 23),
        _case("larger_than_one_block", "100 x 130 times 130 x 90: several tiles and K steps",
              generator, 100, 90, 130),
        _case("deep", "5 x 300 times 300 x 7: K past any single block of K", generator, 5, 7,
              300),
        _case("wide", "5 x 24 times 24 x 2100: more columns of c than a block of up to 2048 "
              "holds", generator, 5, 2100, 24),
        _case("non_contiguous", "a is column-major, b every 2nd row and 3rd column of a "
              "larger matrix", generator, 40, 33, 50, non_contiguous=True),
        _case("all_negative", "every value below zero", generator, 20, 30, 40, shift=-2.0),
        _case("large_values", "values near 1e10: products near 1e20", generator, 20, 30, 40,
              scale=1e10),
        _case("random_1", "random M, N and K", generator, size_between(generator, 1, 80),
              size_between(generator, 1, 80), size_between(generator, 1, 80)),
        _case("random_2", "random M, N and K, non-contiguous", generator,
              size_between(generator, 1, 80), size_between(generator, 1, 80),
              size_between(generator, 1, 80), non_contiguous=True),
    ]


LARGEST = [largest("largest", "M = N = K = 4096, the statement's largest", {
    "a": (4096, 4096), "b": (4096, 4096), "c": Output((4096, 4096)), "M": 4096, "N": 4096,
    "K": 4096})]


MISTAKES = [
    Mistake("k_tail_dropped", "the loop over K visits full blocks only, so the products of "
            "the last K % BLOCK_K columns of a and rows of b are never added",
            "range(0, K, BLOCK_K)", "range(0, K - BLOCK_K + 1, BLOCK_K)", "tail_of_1"),
    Mistake("k_unmasked_in_a", "a's load masks rows but not K: the last K step reads past "
            "the end of each row of a (into the next row, and past the end of a after the "
            "last); b's mask zeroes those products, so the result comes out right, while "
            "on a GPU those loads touch memory the kernel does not own",
            "mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)",
            "mask=rows[:, None] < M, other=0.0)", "deep", reported="past the end of a",
            needs_interpreter=True),
    Mistake("grid_rounded_down", "the grid M // BLOCK_M, N // BLOCK_N drops the ragged tiles",
            "triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N)",
            "M // BLOCK_M, N // BLOCK_N", "n=1"),
    Mistake("contiguous_b", "assumes b is contiguous (row k at k * N)",
            "b.stride(0), b.stride(1)", "N, 1", "non_contiguous"),
]
