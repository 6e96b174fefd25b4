import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import matmul, matmul_reference, runtime
from triton_guide.testing import tolerance

# (M, N, K): ones, primes, powers of two plus one, and more than one tile each way.
SHAPES = runtime.pick(
    interpreter=[(1, 1, 1), (1, 17, 31), (31, 1, 17), (17, 31, 65), (64, 64, 64), (65, 129, 33), (127, 97, 257)],
    gpu=[(1, 1, 1), (1, 17, 31), (31, 1, 17), (17, 31, 65), (64, 64, 64), (65, 129, 33), (127, 97, 257),
         (1000, 1000, 1000), (2049, 1537, 3073), (4096, 4096, 4096)],
)


def expected(a, b):
    return matmul_reference(a.double(), b.double())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "M{}-N{}-K{}".format(*s))
def test_matches_torch(shape, dtype, device, check):
    m, n, k = shape
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(dtype, tensor_cores=True))


@pytest.mark.parametrize(
    "transpose_a,transpose_b",
    [(True, False), (False, True), (True, True)],
    ids=["a_transposed", "b_transposed", "both_transposed"],
)
def test_transposed_inputs(transpose_a, transpose_b, device, check):
    m, n, k = 37, 45, 70
    a = torch.randn(k, m, device=device).t() if transpose_a else torch.randn(m, k, device=device)
    b = torch.randn(n, k, device=device).t() if transpose_b else torch.randn(k, n, device=device)
    assert a.is_contiguous() != transpose_a and b.is_contiguous() != transpose_b
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float32, tensor_cores=True))


def test_row_and_column_slices(device, check):
    a = torch.randn(2 * 37, 70, device=device)[::2]
    b = torch.randn(70, 3 * 45, device=device)[:, ::3]
    check("matmul", matmul(a, b), expected(a, b), rtol=tolerance(torch.float32, tensor_cores=True))


def test_output_dtype_follows_inputs(device):
    a = torch.randn(8, 8, device=device, dtype=torch.float16)
    assert matmul(a, a).dtype == torch.float16


def test_rejects_inner_dimension_mismatch(device):
    with pytest.raises(ValueError, match=r"a's columns \(3\) must equal b's rows \(4\)"):
        matmul(torch.ones(2, 3, device=device), torch.ones(4, 5, device=device))


@pytest.mark.parametrize("shape", [(4,), (2, 3, 4)], ids=["1d", "3d"])
def test_rejects_wrong_rank(shape, device):
    with pytest.raises(ValueError, match="a must have 2 dimensions"):
        matmul(torch.ones(shape, device=device), torch.ones(4, 4, device=device))


def test_rejects_mismatched_dtypes(device):
    with pytest.raises(TypeError, match="same dtype"):
        matmul(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float64], ids=str)
def test_rejects_unsupported_dtype(dtype, device):
    with pytest.raises(TypeError, match="b has dtype"):
        matmul(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device, dtype=dtype))


def test_rejects_wrong_device(wrong_device, device):
    with pytest.raises(ValueError, match="a is on"):
        matmul(torch.ones(2, 2, device=wrong_device), torch.ones(2, 2, device=device))


def test_rejects_empty(device):
    with pytest.raises(ValueError, match="a is empty"):
        matmul(torch.ones(0, 2, device=device), torch.ones(2, 2, device=device))
