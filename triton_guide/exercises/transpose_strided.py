"""Transpose with strides: ``out = x.T`` for any memory layout of ``x`` and ``out``.

Write a kernel that copies an ``M x N`` matrix into an ``N x M`` one, transposed.

Constraints:

* ``x`` has shape ``(M, N)`` and ``out`` shape ``(N, M)``, both float32, and either may be
  a non-contiguous view (a slice, a transpose of a contiguous tensor). Element ``(i, j)``
  of ``x`` is at ``i * x.stride(0) + j * x.stride(1)``; element ``(j, i)`` of ``out`` at
  ``j * out.stride(0) + i * out.stride(1)``. ``1 <= M, N <= 10**4``.
* Nothing is computed: the whole exercise is the addressing, and the masks of a 2-D tile.

``solve(x, out, M, N)`` launches the kernel and returns nothing.
"""

from __future__ import annotations

from .cases import Case, Mistake, Output, largest, randn, size_between, strided

SUMMARY = "out = x.T for any strides of x and out: addressing 2-D tiles"


def reference(x, M, N):
    return x.t()


def tolerance(**inputs):
    return 0.0, 0.0


def _case(name, why, generator, M, N, *, scale=1.0, shift=0.0, non_contiguous=False,
          out_strides=None):
    x = randn(generator, M, N, scale=scale) + shift
    out = Output((N, M), strides=out_strides)
    if non_contiguous:
        # x: every 2nd row and 3rd column of a larger matrix; out: column-major.
        x, out = strided(x), Output((N, M), strides=(1, N))
    return Case(name, why, {"x": x, "out": out, "M": M, "N": N})


def cases(generator):
    return [
        _case("n=1", "1 x 1", generator, 1, 1),
        _case("tail_of_1", "65 x 33: one row and one column past blocks of up to 64 and 32",
              generator, 65, 33),
        _case("non_power_of_two", "100 x 37", generator, 100, 37),
        _case("larger_than_one_block", "200 x 300: many tiles each way", generator, 200, 300),
        _case("non_contiguous", "x is every 2nd row and 3rd column of a larger matrix, out "
              "is column-major", generator, 50, 70, non_contiguous=True),
        _case("out_padded_rows", "out's rows are M + 5 elements apart (a slice of a wider "
              "matrix): neither contiguous nor column-major", generator, 40, 30,
              out_strides=(45, 1)),
        _case("out_every_2nd_row_3rd_column", "out is every 2nd row and 3rd column of a "
              "larger matrix: no stride of out is 1", generator, 20, 25, out_strides=(120, 3)),
        _case("all_negative", "every value below zero", generator, 37, 50, shift=-5.0),
        _case("large_values", "values near 1e30", generator, 40, 30, scale=1e30),
        _case("random_1", "random M and N", generator, size_between(generator, 1, 200),
              size_between(generator, 1, 200)),
        _case("random_2", "random M and N, non-contiguous", generator,
              size_between(generator, 1, 200), size_between(generator, 1, 200),
              non_contiguous=True),
    ]


LARGEST = [largest("largest", "M = N = 10**4, the statement's largest", {
    "x": (10**4, 10**4), "out": Output((10**4, 10**4)), "M": 10**4, "N": 10**4})]


MISTAKES = [
    Mistake("contiguous_output", "writes out as if it were contiguous (row j at j * M)",
            "out.stride(0), out.stride(1)", "M, 1", "non_contiguous"),
    Mistake("output_layout_guessed", "takes out as row-major when it is contiguous and "
            "as column-major otherwise: right for those two layouts, not for a slice of a "
            "wider matrix",
            "out.stride(0), out.stride(1)",
            "*((M, 1) if out.is_contiguous() else (1, N))", "out_padded_rows"),
    Mistake("grid_rounded_down", "the grid M // BLOCK_M drops the last row tile",
            "triton.cdiv(M, BLOCK_M)", "M // BLOCK_M", "n=1"),
    Mistake("store_roles_not_swapped", "stores the tile at out[i, j] instead of out[j, i]: "
            "row i of x times out's row stride, far past the end of out",
            "out_ptr + cols[None, :] * stride_out_row + rows[:, None] * stride_out_col",
            "out_ptr + rows[:, None] * stride_out_row + cols[None, :] * stride_out_col",
            "non_power_of_two", reported="outside every tensor",
            needs_interpreter=True),
]
