import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import runtime
from triton_guide.copy import WALKS, copy, copy_matrix, copy_reference

SIZES = [
    pytest.param(1, id="n=1"),
    pytest.param(1024, id="one_full_block"),
    pytest.param(1025, id="tail_of_1"),
    pytest.param(12_345, id="non_power_of_two"),
]
MATRICES = runtime.pick(
    interpreter=[(1, 1), (1, 1000), (1000, 1), (37, 1001)],
    gpu=[(1, 1), (1, 1000), (1000, 1), (37, 1001), (4099, 8193)],
)


def is_exact_copy(out, x):
    # A copy reproduces every bit; a missed element keeps torch.empty's garbage.
    return torch.equal(out, copy_reference(x))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("bounds", ["mask", "branch"])
def test_copy_is_exact(bounds, n, dtype, device):
    x = torch.randn(n, device=device, dtype=dtype)
    assert is_exact_copy(copy(x, bounds=bounds), x)


@pytest.mark.parametrize("block_size", [64, 1024])
def test_unchecked_bounds_when_length_is_a_multiple_of_the_block(block_size, device):
    x = torch.randn(block_size * 7, device=device)
    assert is_exact_copy(copy(x, bounds="none", block_size=block_size), x)


@pytest.mark.parametrize("num_warps", [1, 8])
def test_any_num_warps(num_warps, device):
    x = torch.randn(3001, device=device)
    assert is_exact_copy(copy(x, num_warps=num_warps, block_size=256), x)


@pytest.mark.parametrize("n", SIZES)
def test_autotuned_copy_is_exact(n, device):
    x = torch.randn(n, device=device)
    assert is_exact_copy(copy(x, autotune=True), x)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", MATRICES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("walk", WALKS)
def test_copy_matrix_is_exact(walk, shape, dtype, device):
    x = torch.randn(shape, device=device, dtype=dtype)
    assert is_exact_copy(copy_matrix(x, walk=walk, block_size=64), x)


def test_rejects_unchecked_bounds_with_a_partial_block(device):
    with pytest.raises(ValueError, match="bounds='none' needs x.numel"):
        copy(torch.ones(1000, device=device), bounds="none", block_size=1024)


def test_rejects_unknown_bounds(device):
    with pytest.raises(ValueError, match="bounds must be one of"):
        copy(torch.ones(4, device=device), bounds="clamp")


def test_rejects_autotune_with_a_fixed_block(device):
    with pytest.raises(ValueError, match="autotune=True chooses block_size"):
        copy(torch.ones(4, device=device), autotune=True, block_size=256)


@pytest.mark.parametrize("num_warps,error,match", [
    (0, ValueError, "num_warps must be a power of two"),
    (3, ValueError, "num_warps must be a power of two"),
    (64, ValueError, "num_warps must be a power of two"),
    (4.0, TypeError, "num_warps must be an int, got float 4.0"),
    (True, TypeError, "num_warps must be an int, got bool True"),
])
def test_rejects_bad_num_warps(num_warps, error, match, device):
    with pytest.raises(error, match=match):
        copy(torch.ones(4, device=device), num_warps=num_warps)


@pytest.mark.parametrize("op", [copy, copy_matrix])
@pytest.mark.parametrize("block_size,error,match", [
    (100, ValueError, "block_size must be a power of two, got 100; try 128"),
    (2**21, ValueError, "block_size is 2097152, but a Triton block holds at most"),
    (256.0, TypeError, "block_size must be an int"),
])
def test_rejects_bad_block_size(op, block_size, error, match, device):
    with pytest.raises(error, match=match):
        op(torch.ones(4, 4, device=device), block_size=block_size)


def test_rejects_unknown_walk(device):
    with pytest.raises(ValueError, match="walk must be one of"):
        copy_matrix(torch.ones(4, 4, device=device), walk="diagonal")


def test_copy_matrix_rejects_non_contiguous(device):
    with pytest.raises(ValueError, match="x is not contiguous"):
        copy_matrix(torch.ones(4, 6, device=device).t())


def test_copy_matrix_rejects_1d(device):
    with pytest.raises(ValueError, match="x must have 2 dimensions"):
        copy_matrix(torch.ones(4, device=device))


def test_rejects_wrong_device(wrong_device):
    with pytest.raises(ValueError, match="x is on"):
        copy(torch.ones(4, device=wrong_device))
