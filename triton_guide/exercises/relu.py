"""ReLU: ``out = max(x, 0)``, and what a mask protects.

Write a kernel that computes ``out[i] = max(x[i], 0)`` for every ``i < n``.

Constraints:

* ``x`` and ``out`` are contiguous float32 vectors of ``n`` elements, ``1 <= n <= 10**7``.
  Every ``x[i]`` is a finite float32 number, up to ``3e38`` in size (no NaN or infinity);
  a negative ``x[i]`` may give ``0.0`` or ``-0.0``.
* Every load and every store of the last block must be masked: the checker surrounds each
  tensor with a margin and reports a store that lands past the end of ``out``, which on a
  GPU would silently overwrite whatever tensor lives there. In the interpreter it also
  reports a load past the end of ``x``, even one whose value is never stored.
* Write into the ``out`` you receive: the checker ignores what ``solve`` returns.

``solve(x, out, n)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import Case, Mistake, Output, largest, randn, size_between

SUMMARY = "out = max(x, 0): a mask on the load and on the store"


def reference(x, n):
    return x.clamp(min=0)


def tolerance(**inputs):
    return 0.0, 0.0


def _case(name, why, generator, n, *, scale=1.0, shift=0.0):
    # Draws beyond 3 standard deviations are clipped: near_float32_max stays finite.
    x = randn(generator, n).clamp(-3.0, 3.0) * scale + shift
    return Case(name, why, {"x": x, "out": Output((n,)), "n": n})


def cases(generator):
    return [
        _case("n=1", "one element: one program, every other lane masked off", generator, 1),
        _case("tail_of_1", "1025 elements: with any block of up to 1024, the last block "
              "holds one", generator, 1025),
        _case("non_power_of_two", "1000 elements", generator, 1000),
        _case("larger_than_one_block", "10007 elements: several programs", generator, 10_007),
        _case("many_programs", "100003 elements: about a hundred blocks of 1024, more than "
              "a grid fixed from the small cases covers", generator, 100_003),
        _case("all_negative", "every x below zero: out is all zeros", generator, 777,
              shift=-5.0),
        _case("all_positive", "every x above zero: out equals x", generator, 777, shift=5.0),
        _case("large_values", "values near 1e30", generator, 500, scale=1e30),
        _case("near_float32_max", "values near +-3e38: arithmetic tricks such as "
              "(x + |x|) / 2 overflow to inf", generator, 300, scale=1e38),
        _case("random_1", "random n", generator, size_between(generator, 1, 5000)),
        _case("random_2", "random n", generator, size_between(generator, 1, 5000)),
    ]


LARGEST = [largest("largest", "n = 10**7, the statement's largest", {
    "x": (10**7,), "out": Output((10**7,)), "n": 10**7})]


MISTAKES = [
    Mistake("store_without_mask", "the store has no mask: the lanes past n write past the "
            "end of out",
            "tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)",
            "tl.store(out_ptr + offsets, tl.maximum(x, 0.0))", "n=1"),
    Mistake("grid_rounded_down", "the grid n // BLOCK_SIZE drops the last, partial block",
            "triton.cdiv(n, BLOCK_SIZE)", "n // BLOCK_SIZE", "tail_of_1"),
    Mistake("load_without_mask", "the load has no mask: the lanes past n read past the end "
            "of x, though the masked store never writes what they read",
            "x = tl.load(x_ptr + offsets, mask=mask)", "x = tl.load(x_ptr + offsets)", "n=1",
            reported="read 1023 elements past the end of x",
            needs_interpreter=True),
    Mistake("own_output", "solve allocates an output of its own and returns it",
            "    relu_kernel[grid](x, out, n, BLOCK_SIZE=BLOCK_SIZE)\n",
            "    out = torch.empty_like(x)\n    relu_kernel[grid](x, out, n, "
            "BLOCK_SIZE=BLOCK_SIZE)\n    return out\n", "n=1",
            reported="write into the out you receive"),
    Mistake("sum_of_x_and_abs", "(x + |x|) / 2 is max(x, 0) in exact arithmetic, but x + |x| "
            "overflows to inf when x is above half of float32's largest value",
            "tl.maximum(x, 0.0)", "(x + tl.abs(x)) * 0.5", "near_float32_max"),
    Mistake("float16_arithmetic", "x is rounded to float16 before the maximum: close, but "
            "float16 keeps 11 significant bits against float32's 24",
            "tl.maximum(x, 0.0)", "tl.maximum(x.to(tl.float16), 0.0)", "all_positive",
            reported="about the rounding of a 16-bit float"),
]
