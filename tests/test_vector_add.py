import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import runtime, vector_add, vector_add_reference
from triton_guide.testing import tolerance

SIZES = runtime.pick(
    interpreter=[1, 2, 17, 127, 1000, 1025, 4097],
    gpu=[1, 2, 17, 127, 1000, 1025, 4097, 2**20 + 3, 2**24 + 1],
)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("n", SIZES, ids=lambda n: f"n={n}")
def test_matches_torch(n, dtype, device, check):
    x = torch.randn(n, device=device, dtype=dtype)
    y = torch.randn(n, device=device, dtype=dtype)
    expected = vector_add_reference(x.double(), y.double())
    check("vector_add", vector_add(x, y), expected, rtol=tolerance(dtype))


@pytest.mark.parametrize("block_size", [1, 64, 4096])
def test_any_power_of_two_block(block_size, device, check):
    x, y = torch.randn(2, 1000, device=device).unbind(0)
    check("vector_add", vector_add(x, y, block_size=block_size), x.double() + y.double(), rtol=1e-6)


def test_any_shape(device, check):
    x = torch.randn(3, 5, 7, device=device)
    y = torch.randn(3, 5, 7, device=device)
    out = vector_add(x, y)
    assert out.shape == (3, 5, 7)
    check("vector_add", out, x.double() + y.double(), rtol=1e-6)


def test_rejects_non_tensor(device):
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        vector_add([1.0, 2.0], torch.ones(2, device=device))


def test_rejects_wrong_device(wrong_device, device):
    with pytest.raises(ValueError, match="y is on"):
        vector_add(torch.ones(4, device=device), torch.ones(4, device=wrong_device))


def test_rejects_mismatched_shapes(device):
    with pytest.raises(ValueError, match="same shape"):
        vector_add(torch.ones(4, device=device), torch.ones(5, device=device))


def test_rejects_mismatched_dtypes(device):
    with pytest.raises(TypeError, match="same dtype"):
        vector_add(torch.ones(4, device=device), torch.ones(4, device=device, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64], ids=str)
def test_rejects_unsupported_dtype(dtype, device):
    with pytest.raises(TypeError, match="x has dtype"):
        vector_add(torch.ones(4, device=device, dtype=dtype), torch.ones(4, device=device, dtype=dtype))


def test_rejects_empty(device):
    with pytest.raises(ValueError, match="x is empty"):
        vector_add(torch.ones(0, device=device), torch.ones(0, device=device))


def test_rejects_non_contiguous(device):
    x = torch.ones(8, device=device)[::2]
    with pytest.raises(ValueError, match="x is not contiguous"):
        vector_add(x, torch.ones(4, device=device))


@pytest.mark.parametrize("block_size", [0, 3, 1000])
def test_rejects_block_size_not_power_of_two(block_size, device):
    with pytest.raises(ValueError, match="power of two"):
        vector_add(torch.ones(4, device=device), torch.ones(4, device=device), block_size=block_size)


@pytest.mark.skipif(not runtime.interpreting(), reason="bfloat16 is refused only under the interpreter")
def test_interpreter_refuses_bfloat16(device):
    x = torch.ones(4, device=device, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="interpreter cannot compute"):
        vector_add(x, x)
