import importlib
import math

import pytest
import torch
import triton

from conftest import FLOAT_DTYPES
from triton_guide import runtime, softmax, softmax_naive, softmax_reference
from triton_guide.softmax import MAX_ONE_PASS_BLOCK, one_pass_rows
from triton_guide.testing import tolerance

SHAPES = runtime.pick(
    interpreter=[(1,), (1, 1), (1, 17), (3, 127), (5, 1000), (2, 3, 257), (4, 1025)],
    gpu=[(1,), (1, 1), (1, 17), (3, 127), (5, 1000), (2, 3, 257), (4, 1025), (4099, 4097), (1031, 8191)],
)
# Rows longer than one block of the online kernel: (shape, block_size).
LONG_ROWS = runtime.pick(
    interpreter=[((3, 1000), 64), ((2, 4097), 1024), ((1, 257), 256)],
    gpu=[((3, 1000), 64), ((2, 4097), 1024), ((1, 257), 256), ((257, 65537), 4096)],
)
METHODS = ["one_pass", "online"]


def expected(x):
    return softmax_reference(x.double())


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_one_pass_matches_torch(shape, dtype, device, check):
    x = torch.randn(shape, device=device, dtype=dtype)
    check("softmax(one_pass)", softmax(x, method="one_pass"), expected(x), rtol=tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape,block_size", LONG_ROWS, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else f"block={v}")
def test_online_matches_torch_over_many_blocks(shape, block_size, dtype, device, check):
    x = torch.randn(shape, device=device, dtype=dtype)
    out = softmax(x, method="online", block_size=block_size)
    check("softmax(online)", out, expected(x), rtol=tolerance(dtype))


# Short rows are taken several to a program (ONE_PASS_TILE elements per program): row counts
# that leave the last program's tile part empty, in layouts the kernel reads as they are
# (contiguous, every other column, transposed: columns far apart) and one the launcher must
# copy first (a 3-D tensor with its dimensions reversed: its rows are not evenly spaced).
SHORT_ROWS = [(37, 100), (1001, 129), (2, 7, 33)]
LAYOUTS = [(shape, layout) for shape in SHORT_ROWS for layout in ("contiguous", "every_other")]
LAYOUTS += [(shape, "transposed") for shape in SHORT_ROWS if len(shape) == 2]
LAYOUTS += [(shape, "reversed_dims") for shape in SHORT_ROWS if len(shape) == 3]


def laid_out(shape, layout, device):
    """A tensor of ``shape`` in ``layout``, and the column stride the kernel should see."""
    if layout == "transposed":
        return torch.randn(shape[::-1], device=device).t(), shape[0]
    if layout == "every_other":
        return torch.randn(*shape[:-1], 2 * shape[-1], device=device)[..., ::2], 2
    if layout == "reversed_dims":  # reshape(-1, n) cannot view it: the launcher copies
        return torch.randn(shape[::-1], device=device).permute(2, 1, 0), 1
    return torch.randn(shape, device=device), 1


class KernelSpy:
    """Stands in for a kernel: records the arguments of each launch, then launches."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append(args)
            return self.kernel[grid](*args, **kwargs)
        return launch


@pytest.mark.parametrize("shape, layout", LAYOUTS,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else v)
def test_several_short_rows_per_program(shape, layout, device, check, monkeypatch):
    block_rows = one_pass_rows(triton.next_power_of_2(shape[-1]))
    num_rows = math.prod(shape[:-1])
    assert block_rows > 1 and num_rows % block_rows != 0  # the case this test is for
    x, column_stride = laid_out(shape, layout, device)
    module = importlib.import_module("triton_guide.softmax")
    spy = KernelSpy(module.softmax_kernel)
    monkeypatch.setattr(module, "softmax_kernel", spy)
    out = softmax(x, method="one_pass")
    ((rows, _, _, seen_column_stride, *_),) = spy.launches
    # what the kernel read: x itself, at its own strides, unless the layout forces a copy
    assert (x.shape, rows.data_ptr() == x.data_ptr(), seen_column_stride) == (
        torch.Size(shape), layout != "reversed_dims", column_stride)
    check("softmax(one_pass)", out, expected(x), rtol=1e-5)


def test_auto_takes_online_path_for_rows_wider_than_a_block(device, check):
    x = torch.randn(2, MAX_ONE_PASS_BLOCK + 1, device=device)
    check("softmax(online)", softmax(x), expected(x), rtol=1e-5)
    with pytest.raises(ValueError, match="do not fit the one-pass kernel"):
        softmax(x, method="one_pass")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype,magnitude", [(torch.float32, 1e4), (torch.float32, 1e30), (torch.float16, 6e4)], ids=["float32-1e4", "float32-1e30", "float16-6e4"])
def test_large_magnitudes_do_not_overflow(method, dtype, magnitude, device, check):
    x = ((torch.rand(4, 300, device=device) * 2 - 1) * magnitude).to(dtype)
    kwargs = {"block_size": 64} if method == "online" else {}
    out = softmax(x, method=method, **kwargs)
    assert torch.isfinite(out).all()
    check(f"softmax({method})", out, expected(x), rtol=tolerance(dtype))


@pytest.mark.parametrize("method", METHODS)
def test_rows_containing_neg_inf(method, device, check):
    x = torch.randn(6, 200, device=device)
    x[0, 5] = -float("inf")
    x[1, :150] = -float("inf")  # the online kernel's first blocks see nothing but -inf
    x[2, ::2] = -float("inf")
    x[3, -1] = -float("inf")
    kwargs = {"block_size": 64} if method == "online" else {}
    check(f"softmax({method})", softmax(x, method=method, **kwargs), expected(x), rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy, interpreter
@pytest.mark.parametrize("method", METHODS)
def test_row_of_only_neg_inf_gives_nan_like_torch(method, device):
    x = torch.randn(3, 100, device=device)
    x[1] = -float("inf")
    kwargs = {"block_size": 32} if method == "online" else {}
    out = softmax(x, method=method, **kwargs)
    assert torch.isnan(out[1]).all() and torch.isnan(softmax_reference(x)[1]).all()
    assert torch.isfinite(out[[0, 2]]).all()


@pytest.mark.parametrize("method", METHODS)
def test_strided_rows(method, device, check):
    x = torch.randn(9, 300, device=device)[::2, 17:250]  # row stride 600, 233 columns
    kwargs = {"block_size": 64} if method == "online" else {}
    check(f"softmax({method})", softmax(x, method=method, **kwargs), expected(x), rtol=1e-5)


def test_naive_softmax_matches_torch(device, check):
    x = torch.randn(7, 333, device=device)
    check("softmax(naive)", softmax_naive(x), expected(x), rtol=1e-5)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "make",
    [lambda d: torch.randn(8, 9, device=d).t(), lambda d: torch.randn(1, 4, device=d).t()],
    ids=["transposed_8x9", "transposed_1x4"],
)
def test_last_dimension_with_any_stride(make, method, device, check):
    x = make(device)
    kwargs = {"block_size": 4} if method == "online" else {}
    check(f"softmax({method})", softmax(x, method=method, **kwargs), expected(x), rtol=1e-5)


def test_rows_that_cannot_be_flattened_without_a_copy(device, check):
    x = torch.randn(4, 6, 10, device=device).transpose(0, 1)
    check("softmax(one_pass)", softmax(x), expected(x), rtol=1e-5)


def test_rejects_wrong_device(wrong_device):
    with pytest.raises(ValueError, match="x is on"):
        softmax(torch.randn(3, 4, device=wrong_device))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64], ids=str)
def test_rejects_unsupported_dtype(dtype, device):
    with pytest.raises(TypeError, match="x has dtype"):
        softmax(torch.ones(3, 4, device=device, dtype=dtype))


def test_rejects_scalar(device):
    with pytest.raises(ValueError, match="at least 1 dimension"):
        softmax(torch.tensor(1.0, device=device))


def test_rejects_empty(device):
    with pytest.raises(ValueError, match="x is empty"):
        softmax(torch.ones(0, 5, device=device))


def test_rejects_unknown_method(device):
    with pytest.raises(ValueError, match="method must be"):
        softmax(torch.ones(3, 4, device=device), method="fast")


def test_rejects_bad_online_block(device):
    with pytest.raises(ValueError, match="power of two"):
        softmax(torch.ones(3, 4, device=device), method="online", block_size=100)
    with pytest.raises(ValueError, match="applies to method='online' only"):
        softmax(torch.ones(3, 4, device=device), method="one_pass", block_size=64)
