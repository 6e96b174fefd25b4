import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import runtime, transpose, transpose_reference

SHAPES = runtime.pick(
    interpreter=[(1, 1), (1, 37), (37, 1), (31, 17), (64, 64), (65, 129)],
    gpu=[(1, 1), (1, 37), (37, 1), (31, 17), (64, 64), (65, 129), (4097, 2049)],
)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_torch(shape, dtype, device, check):
    x = torch.randn(shape, device=device, dtype=dtype)
    # A transpose only moves values: it must be exact.
    check("transpose", transpose(x), transpose_reference(x), rtol=0.0)


@pytest.mark.parametrize("blocks", [(1, 1), (16, 64), (64, 16)], ids=str)
def test_any_power_of_two_tile(blocks, device, check):
    x = torch.randn(45, 70, device=device)
    check("transpose", transpose(x, block_rows=blocks[0], block_cols=blocks[1]), x.t(), rtol=0.0)


def test_strided_input(device, check):
    x = torch.randn(60, 90, device=device)[::3, 5::2]
    check("transpose", transpose(x), x.t(), rtol=0.0)


def test_rejects_wrong_rank(device):
    with pytest.raises(ValueError, match="x must have 2 dimensions"):
        transpose(torch.ones(3, device=device))


def test_rejects_block_not_power_of_two(device):
    with pytest.raises(ValueError, match="block_cols must be a power of two"):
        transpose(torch.ones(3, 3, device=device), block_cols=12)


def test_rejects_wrong_device(wrong_device):
    with pytest.raises(ValueError, match="x is on"):
        transpose(torch.ones(3, 3, device=wrong_device))
