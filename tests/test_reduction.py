import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import runtime, vector_sum, vector_sum_reference
from triton_guide.reduction import MAX_PARTIALS
from triton_guide.testing import tolerance

METHODS = ["two_stage", "atomic"]
BLOCK = 1024
# Lengths named by what is special about them for a block of 1024 elements.
SIZES = runtime.pick(
    interpreter=[
        pytest.param(1, id="n=1"),
        pytest.param(17, id="shorter_than_a_block"),
        pytest.param(BLOCK, id="one_full_block"),
        pytest.param(BLOCK + 1, id="tail_of_1"),
        pytest.param(12_345, id="non_power_of_two"),
        pytest.param(MAX_PARTIALS * BLOCK + 3, id="more_blocks_than_programs"),
    ],
    gpu=[
        pytest.param(1, id="n=1"),
        pytest.param(17, id="shorter_than_a_block"),
        pytest.param(BLOCK, id="one_full_block"),
        pytest.param(BLOCK + 1, id="tail_of_1"),
        pytest.param(12_345, id="non_power_of_two"),
        pytest.param(MAX_PARTIALS * BLOCK + 3, id="more_blocks_than_programs"),
        pytest.param(2**26 + 7, id="n=2**26+7"),
    ],
)


def check_sum(check, op, actual, x):
    """Compare with the float64 sum. A sum of n random-sign values is typically of size
    ||x||_2, so the error is measured against that scale (``atol``), not against the sum
    itself, which can land near zero by chance."""
    reference = vector_sum_reference(x.double())
    scale = x.double().norm().item()
    rtol = tolerance(x.dtype)
    check(op, actual, reference, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("method", METHODS)
def test_matches_torch_in_float64(method, n, dtype, device, check):
    x = torch.randn(n, device=device, dtype=dtype)
    out = vector_sum(x, method=method)
    assert out.dtype == dtype and out.shape == ()
    check_sum(check, f"vector_sum({method})", out, x)


@pytest.mark.parametrize("method", METHODS)
def test_sum_of_ones_is_exact(method, device):
    # Every partial sum of ones is an integer below 2**24, so float32 holds it exactly:
    # any lost or doubled block shows up as a wrong integer.
    n = runtime.pick(interpreter=50_001, gpu=2**24 - 5)
    out = vector_sum(torch.ones(n, device=device), method=method)
    assert out.item() == n


@pytest.mark.parametrize(
    "num_programs", [1, 3, MAX_PARTIALS], ids=lambda p: f"programs={p}"
)
@pytest.mark.parametrize("method", METHODS)
def test_any_number_of_programs(method, num_programs, device, check):
    x = torch.randn(10_007, device=device)
    out = vector_sum(x, method=method, num_programs=num_programs, block_size=256)
    check_sum(check, f"vector_sum({method})", out, x)


def test_any_shape(device, check):
    x = torch.randn(3, 5, 7, device=device)
    check_sum(check, "vector_sum(two_stage)", vector_sum(x), x)


def test_two_stage_is_deterministic(device):
    x = torch.randn(runtime.pick(interpreter=30_011, gpu=2**24 + 1), device=device)
    results = {vector_sum(x, method="two_stage").item() for _ in range(5)}
    assert len(results) == 1


def test_rejects_unknown_method(device):
    with pytest.raises(ValueError, match="method must be 'two_stage' or 'atomic'"):
        vector_sum(torch.ones(4, device=device), method="tree")


@pytest.mark.parametrize("block_size,error,match", [
    (0, ValueError, "block_size must be a power of two"),
    (3, ValueError, "block_size must be a power of two"),
    (1000, ValueError, "block_size must be a power of two, got 1000; try 1024"),
    (2**21, ValueError, "block_size is 2097152, but a Triton block holds at most"),
    (1024.0, TypeError, "block_size must be an int"),
])
def test_rejects_bad_block_size(block_size, error, match, device):
    with pytest.raises(error, match=match):
        vector_sum(torch.ones(4, device=device), block_size=block_size)


@pytest.mark.parametrize("num_programs,error,match", [
    (0, ValueError, "num_programs must be between 1 and"),
    (MAX_PARTIALS + 1, ValueError, "num_programs must be between 1 and"),
    (2.5, TypeError, "num_programs must be an int, got float 2.5"),
    (True, TypeError, "num_programs must be an int, got bool True"),
])
def test_rejects_bad_num_programs(num_programs, error, match, device):
    with pytest.raises(error, match=match):
        vector_sum(torch.ones(4, device=device), num_programs=num_programs)


def test_rejects_non_contiguous(device):
    with pytest.raises(ValueError, match="x is not contiguous"):
        vector_sum(torch.ones(4, 4, device=device).t())


def test_rejects_wrong_device(wrong_device):
    with pytest.raises(ValueError, match="x is on"):
        vector_sum(torch.ones(4, device=wrong_device))


def test_rejects_empty(device):
    with pytest.raises(ValueError, match="x is empty"):
        vector_sum(torch.ones(0, device=device))
