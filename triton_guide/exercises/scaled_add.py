"""Scaled add: ``out = alpha * x + y``, with a scalar argument.

Write a kernel that computes ``out[i] = alpha * x[i] + y[i]`` for every ``i < n``.

Constraints:

* ``x``, ``y`` and ``out`` are contiguous float32 vectors of ``n`` elements on the device,
  ``1 <= n <= 10**7``; ``out`` is allocated for you (the checker fills it with NaN first).
* ``alpha`` is a Python float. Pass it to the kernel as an ordinary argument: a
  ``tl.constexpr`` would compile a new kernel for every value (the checker fails it, and
  the same for ``n``).
* ``n`` is not a multiple of any block size you may pick: launch enough programs and mask
  the last block.

``solve(x, y, out, alpha, n)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import Case, Mistake, Output, largest, randn, size_between

SUMMARY = "out = alpha * x + y: a scalar argument, a 1-D grid and a mask"


def reference(x, y, alpha, n):
    return alpha * x + y


def tolerance(x, y, alpha, **_):
    # float32 rounds alpha, alpha * x and the sum, each to within 6e-8 of its size; where
    # alpha * x nearly cancels y the result is small and those errors are not, relative to
    # it. So the absolute tolerance scales with the terms, not with the result.
    return 1e-6, 1e-6 * float((abs(alpha) * x.abs() + y.abs()).max())


def _case(name, why, generator, n, *, alpha=None, scale=1.0, shift=0.0):
    alpha = float(randn(generator, 1)) if alpha is None else alpha
    x = randn(generator, n, scale=scale) + shift
    y = randn(generator, n, scale=scale) + shift
    return Case(name, why, {"x": x, "y": y, "out": Output((n,)), "alpha": alpha, "n": n})


def cases(generator):
    return [
        _case("n=1", "one element: one program, every other lane masked off", generator, 1),
        _case("tail_of_1", "1025 elements: with any block of up to 1024, the last block "
              "holds one", generator, 1025),
        _case("non_power_of_two", "1000 elements", generator, 1000),
        _case("larger_than_one_block", "10007 elements: several programs", generator, 10_007),
        _case("many_programs", "100003 elements: about a hundred blocks of 1024, more than "
              "a grid fixed from the small cases covers", generator, 100_003),
        _case("alpha_zero", "alpha = 0: out must equal y", generator, 300, alpha=0.0),
        _case("all_negative", "every x and y below zero", generator, 777, shift=-5.0),
        _case("large_values", "values near 1e30 (float32 goes to 3.4e38)", generator, 500,
              scale=1e30, alpha=3.0),
        _case("random_1", "random n", generator, size_between(generator, 1, 5000)),
        _case("random_2", "random n", generator, size_between(generator, 1, 5000)),
    ]


LARGEST = [largest("largest", "n = 10**7, the statement's largest", {
    "x": (10**7,), "y": (10**7,), "out": Output((10**7,)), "alpha": 2.0, "n": 10**7})]


MISTAKES = [
    Mistake("grid_rounded_down", "the grid n // BLOCK_SIZE drops the last, partial block "
            "(and launches nothing at all for n < BLOCK_SIZE)",
            "triton.cdiv(n, BLOCK_SIZE)", "n // BLOCK_SIZE", "n=1"),
    Mistake("mask_off_by_one", "offsets <= n lets one lane past the end store",
            "mask = offsets < n", "mask = offsets <= n", "n=1"),
    Mistake("alpha_constexpr", "alpha is declared tl.constexpr: right values, but a new "
            "kernel compiled for every alpha",
            "alpha, n, BLOCK_SIZE: tl.constexpr", "alpha: tl.constexpr, n, BLOCK_SIZE: "
            "tl.constexpr", "n=1", reported="took a float as tl.constexpr alpha"),
    Mistake("size_constexpr", "n is declared tl.constexpr: right values, but a new kernel "
            "compiled for every length",
            "alpha, n, BLOCK_SIZE: tl.constexpr", "alpha, n: tl.constexpr, BLOCK_SIZE: "
            "tl.constexpr", "n=1", reported="took the size n as tl.constexpr"),
]
