"""The matmul ladder (triton_guide.matmul_steps): each step against torch, and the program ->
tile mapping that the grouped kernels and the page's picture share."""

import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import matmul_reference
from triton_guide.matmul_steps import (
    INTERPRETER_TILE,
    matmul_grouped,
    matmul_pointer_loads,
    matmul_row_major,
    program_tiles,
)
from triton_guide.runtime import interpreting
from triton_guide.testing import tolerance

TILE_M = INTERPRETER_TILE["BLOCK_SIZE_M"] if interpreting() else 128

STEPS = [
    pytest.param(matmul_row_major, id="row_major"),
    pytest.param(lambda a, b: matmul_grouped(a, b, group_size_m=1), id="grouped_1"),
    pytest.param(lambda a, b: matmul_grouped(a, b, group_size_m=3), id="grouped_3"),
    pytest.param(matmul_grouped, id="grouped_8"),
    pytest.param(matmul_pointer_loads, id="pointer_loads"),
]

# (M, N, K)
SHAPES = [
    pytest.param((1, 1, 1), id="one_by_one"),
    pytest.param((17, 31, 65), id="non_power_of_two"),
    pytest.param((TILE_M + 1, 2 * TILE_M + 1, 33), id="tail_of_1"),
    pytest.param((5 * TILE_M - 3, 3, 70), id="short_last_group"),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("step", STEPS)
def test_step_matches_torch(step, shape, dtype, device, check):
    m, n, k = shape
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    expected = matmul_reference(a.double(), b.double())
    check("matmul steps", step(a, b), expected, rtol=tolerance(dtype, tensor_cores=True))


@pytest.mark.parametrize("step", STEPS)
def test_step_reads_non_contiguous_inputs(step, device, check):
    a = torch.randn(70, 37, device=device).t()
    b = torch.randn(70, 3 * 45, device=device)[:, ::3]
    assert not a.is_contiguous() and not b.is_contiguous()
    expected = matmul_reference(a.double(), b.double())
    rtol = tolerance(torch.float32, tensor_cores=True)
    check("matmul steps", step(a, b), expected, rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_resolves_negative_bit_views(step, device, check):
    a = torch.randn(20, 30, device=device)._neg_view()
    b = torch.randn(30, 10, device=device)
    expected = matmul_reference(a.resolve_neg().double(), b.double())
    check("matmul steps", step(a, b), expected, rtol=tolerance(torch.float32, tensor_cores=True))


def test_pointer_loads_read_b_by_columns_through_the_pointer_kernel(device, check, launched):
    # A shape and layout for which triton_guide.matmul reads through descriptors.
    import importlib

    module = importlib.import_module("triton_guide.matmul")
    if not module.has_tma(device):
        pytest.skip("this GPU has no TMA")
    a = torch.randn(272, 80, device=device)
    b = torch.randn(48, 80, device=device).t()
    assert module.kernel_inputs(a, b)[2]
    expected = matmul_reference(a.double(), b.double())
    rtol = tolerance(torch.float32, tensor_cores=True)
    check("matmul steps", matmul_pointer_loads(a, b), expected, rtol=rtol)
    check("matmul steps", module.matmul(a, b), expected, rtol=rtol)
    assert launched == [module.matmul_kernel, module.matmul_tma_kernel]


@pytest.mark.parametrize(
    "rows,cols,group",
    [(1, 1, 1), (9, 9, 3), (7, 5, 3), (4, 6, 8), (5, 3, 1)],
    ids=["one_tile", "groups_divide_rows", "short_last_group", "group_taller_than_c",
         "row_major"],
)
def test_program_tiles_cover_every_tile_once(rows, cols, group):
    tiles = program_tiles(rows, cols, group)
    every_tile = {(i, j) for i in range(rows) for j in range(cols)}
    assert sorted(map(tuple, tiles.tolist())) == sorted(every_tile)


def test_group_of_one_is_row_major():
    rows, cols = 4, 7
    expected = [list(divmod(pid, cols)) for pid in range(rows * cols)]
    assert program_tiles(rows, cols, 1).tolist() == expected


def test_grouped_order_walks_down_a_group_before_moving_right():
    # 9 x 9 tiles in groups of 3 tile rows: programs 0, 1, 2 go down column 0, then column 1.
    first_six = program_tiles(9, 9, 3)[:6].tolist()
    assert first_six == [[0, 0], [1, 0], [2, 0], [0, 1], [1, 1], [2, 1]]


@pytest.mark.parametrize("group", [0, -2, 1.5], ids=["zero", "negative", "float"])
def test_grouped_rejects_bad_group_size(group, device):
    a = torch.ones(4, 4, device=device)
    with pytest.raises(ValueError, match="group_size_m must be a positive int"):
        matmul_grouped(a, a, group_size_m=group)


def test_row_major_rejects_inner_dimension_mismatch(device):
    with pytest.raises(ValueError, match=r"a's columns \(3\) must equal b's rows \(4\)"):
        matmul_row_major(torch.ones(2, 3, device=device), torch.ones(4, 5, device=device))
