"""Views that reach past 2**31 - 1 elements into their storage: offsets must be int64.

Every stride here is below 2**31 (a stride of 2**31 or more reaches the kernel as an int64
argument already); it is ``index * stride`` that passes 2**31 - 1.

The storage is allocated with ``torch.empty`` and never filled: the operating system maps
a page only when it is touched, so a 4 GiB float16 buffer costs the few pages the view
writes. On a GPU the same tests allocate the buffer for real (4 GiB of GPU memory).
"""

import pytest
import torch

from triton_guide import (
    attention,
    attention_reference,
    matmul,
    runtime,
    softmax,
    transpose,
    vector_add,
)
from triton_guide.testing import tolerance
from triton_guide.validation import INT32_MAX, farthest_offset, needs_int64_offsets

FAR = 2**31  # the first element offset that int32 cannot hold


@pytest.fixture
def huge_storage(device):
    """A float16 buffer of 2**31 + 2**16 elements (4 GiB, mostly never touched on the CPU)."""
    try:
        storage = torch.empty(FAR + 2**16, dtype=torch.float16, device=device)
    except (RuntimeError, MemoryError) as error:  # no room for the address space or memory
        pytest.skip(f"cannot allocate a 4 GiB buffer here: {error}")
    yield storage
    del storage


def far_view(storage, shape, strides):
    """A view of ``storage`` with the given strides, filled with fresh random values."""
    view = storage.as_strided(shape, strides)
    assert farthest_offset(view) > INT32_MAX
    view.copy_(torch.randn(shape, dtype=torch.float32))
    return view


def test_helper_measures_the_farthest_offset():
    base = torch.empty(10, 10, device="meta")
    assert farthest_offset(base[2:, 3:]) == 99  # storage offset 23 + 7 * 10 + 6 * 1


@pytest.mark.parametrize(
    "shape,strides,largest_index,expected",
    [
        ((2, 3), (FAR, 1), 0, True),
        ((2, 3), (FAR // 2, 1), 0, False),
        ((2, 3), (1, FAR // 2), 0, True),
        ((8,), (1,), INT32_MAX + 1, True),
        ((8,), (1,), INT32_MAX, False),
    ],
    ids=["row_stride_2**31", "last_row_at_2**30", "column_stride_2**30", "index_past_int32", "index_at_int32_max"],
)
def test_helper_decides_int64(shape, strides, largest_index, expected):
    view = torch.empty_strided(shape, strides, device="meta")
    assert needs_int64_offsets(view, largest_index=largest_index) == expected


@pytest.mark.parametrize("method", ["one_pass", "online"])
@pytest.mark.parametrize(
    "shape,strides",
    [((3, 16), (FAR // 2 + 8, 1)), ((3, 4), (1, FAR // 3 + 1))],
    ids=["third_row_past_2**31", "last_column_past_2**31"],
)
def test_softmax_far_view(huge_storage, shape, strides, method, check):
    x = far_view(huge_storage, shape, strides)
    kwargs = {"block_size": 2} if method == "online" else {}
    out = softmax(x, method=method, **kwargs)
    check(f"softmax({method})", out, torch.softmax(x.double(), -1), rtol=tolerance(x.dtype))


def test_softmax_backward_far_gradient(huge_storage, device, check):
    x = torch.randn(3, 16, device=device, dtype=torch.float16, requires_grad=True)
    grad_out = far_view(huge_storage, (3, 16), (FAR // 2 + 8, 1))
    (grad,) = torch.autograd.grad(softmax(x), x, grad_out)
    x64 = x.detach().double().requires_grad_()
    (expected,) = torch.autograd.grad(torch.softmax(x64, -1), x64, grad_out.double())
    check("softmax backward", grad, expected, rtol=tolerance(x.dtype), atol=1e-3)


def test_transpose_far_view(huge_storage, check):
    x = far_view(huge_storage, (3, 5), (FAR // 2 + 7, 1))
    check("transpose", transpose(x), x.t(), rtol=0.0)


@pytest.mark.parametrize("far_operand", ["a", "b"])
def test_matmul_far_view(huge_storage, far_operand, device, check):
    if far_operand == "a":
        a = far_view(huge_storage, (3, 20), (FAR // 2, 1))
        b = torch.randn(20, 5, device=device, dtype=torch.float16)
    else:
        a = torch.randn(3, 20, device=device, dtype=torch.float16)
        b = far_view(huge_storage, (20, 5), (1, FAR // 4))
    out = matmul(a, b)
    check("matmul", out, a.double() @ b.double(), rtol=tolerance(a.dtype, tensor_cores=True))


def test_attention_far_view_forward_and_backward(huge_storage, device, check):
    # Query rows 2**30 apart: within one (batch, head), row offsets pass 2**31.
    q = far_view(huge_storage, (1, 1, 3, 16), (16, 16, FAR // 2, 1)).requires_grad_()
    k = torch.randn(1, 1, 3, 16, device=device, dtype=torch.float16, requires_grad=True)
    v = torch.randn(1, 1, 3, 16, device=device, dtype=torch.float16, requires_grad=True)
    out = attention(q, k, v, causal=True)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    expected = attention_reference(q64, k64, v64, causal=True)
    expected_grads = torch.autograd.grad(expected, (q64, k64, v64), grad_out.double())
    rtol = tolerance(torch.float16, tensor_cores=True)
    check("attention forward", out, expected, rtol=rtol)
    for grad, want, name in zip(grads, expected_grads, ("dq", "dk", "dv")):
        check("attention backward", grad, want, rtol=rtol, atol=rtol * want.abs().max().item(), name=name)


@pytest.mark.skipif(
    runtime.interpreting(),
    reason="needs a GPU: vector_add takes contiguous tensors, so reaching 2**31 needs 2**31 "
    "real elements (three 4 GiB tensors, two million interpreted programs)",
)
def test_vector_add_more_than_2_pow_31_elements(device):
    n = FAR + 1000
    x = torch.empty(n, dtype=torch.float16, device=device)
    y = torch.empty(n, dtype=torch.float16, device=device)
    x[-4096:].normal_()
    y[-4096:].normal_()
    out = vector_add(x, y)
    # The tail is where int32 offsets would wrap round; compare it exactly.
    torch.testing.assert_close(out[-4096:], x[-4096:] + y[-4096:], rtol=0, atol=0)
