"""Sum with atomics: ``out[0] = x.sum()``, many programs adding into one number.

Write a kernel in which every program sums its block of ``x`` and adds that partial sum
into ``out[0]`` with ``tl.atomic_add``, so that one launch reduces the whole vector.

Constraints:

* ``x`` is a contiguous float32 vector of ``n`` elements, ``1 <= n <= 10**7``; ``out`` is
  a float32 tensor of one element.
* ``out`` arrives holding garbage (the checker fills it with NaN): set it to zero before
  the launch (``out.zero_()`` in ``solve``), since the programs only ever add to it. Not
  from inside the kernel: nothing makes program 0 run before the others (the interpreter
  runs the checker's launches in reverse order, to show it).
* Plain ``tl.store`` of a partial sum is a race: the programs would overwrite each other.
  So is ``tl.load`` of ``out``, an addition and ``tl.store``: another program can store
  between one program's load and its store, and that addition is lost. (The interpreter
  runs one program at a time, so the sum would come out right there; the checker reports
  an element that one program stores and another touches as a race.) Atomic float
  additions happen in no fixed order, so the result may differ from run to run in the
  last bits; the checker allows for that.

``solve(x, out, n)`` prepares ``out``, launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import Case, Mistake, Output, largest, randn, size_between

SUMMARY = "out = sum(x): partial sums per program, combined with tl.atomic_add"


def reference(x, n):
    return x.sum().reshape(1)


def tolerance(x, n):
    # float32 additions in an order the atomics choose, against a float64 sum.
    return 1e-5, 1e-6 * x.abs().sum().item()


def _case(name, why, generator, n, *, scale=1.0, shift=0.0):
    x = randn(generator, n, scale=scale) + shift
    return Case(name, why, {"x": x, "out": Output((1,)), "n": n})


def cases(generator):
    return [
        _case("n=1", "one element: one program", generator, 1),
        _case("tail_of_1", "1025 elements: with any block of up to 1024, the last block "
              "holds one", generator, 1025),
        _case("non_power_of_two", "1000 elements", generator, 1000),
        _case("larger_than_one_block", "10007 elements: many programs add into out",
              generator, 10_007),
        _case("many_programs", "100003 elements: about a hundred blocks of 1024, more than "
              "a grid fixed from the small cases covers", generator, 100_003),
        _case("all_negative", "every value below zero", generator, 777, shift=-5.0),
        _case("large_values", "values near 1e30", generator, 500, scale=1e30),
        _case("random_1", "random n", generator, size_between(generator, 1, 20_000)),
        _case("random_2", "random n", generator, size_between(generator, 1, 20_000)),
    ]


LARGEST = [largest("largest", "n = 10**7, the statement's largest", {
    "x": (10**7,), "out": Output((1,)), "n": 10**7})]


MISTAKES = [
    Mistake("out_not_zeroed", "out is never set to zero, so the first addition adds to NaN",
            "    out.zero_()\n", "", "n=1"),
    Mistake("grid_rounded_down", "the grid is n // BLOCK_SIZE, which launches no program at "
            "all when n < BLOCK_SIZE and drops the tail otherwise",
            "triton.cdiv(n, BLOCK_SIZE)", "n // BLOCK_SIZE", "n=1",
            reported="Every wrong element is exactly 0"),
    Mistake("store_not_atomic", "each program stores its partial sum over the others'",
            "tl.atomic_add(out_ptr, tl.sum(x, axis=0))", "tl.store(out_ptr, tl.sum(x, axis=0))",
            "larger_than_one_block"),
    Mistake("zeroed_in_kernel", "program 0 zeroes out inside the kernel, after other "
            "programs may have added to it",
            "    tl.atomic_add(out_ptr, tl.sum(x, axis=0))\n\n\n"
            "def solve(x: torch.Tensor, out: torch.Tensor, n: int):\n    out.zero_()\n",
            "    if tl.program_id(0) == 0:\n        tl.store(out_ptr, 0.0)\n"
            "    tl.atomic_add(out_ptr, tl.sum(x, axis=0))\n\n\n"
            "def solve(x: torch.Tensor, out: torch.Tensor, n: int):\n",
            "larger_than_one_block",
            needs_interpreter=True),
    Mistake("load_add_store", "each program loads out, adds its partial sum and stores it "
            "back: on a GPU a program storing in between loses its addition",
            "tl.atomic_add(out_ptr, tl.sum(x, axis=0))",
            "tl.store(out_ptr, tl.load(out_ptr) + tl.sum(x, axis=0))",
            "larger_than_one_block", reported="race on 1 element of out",
            needs_interpreter=True),
]
