import importlib
import math

import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import attention, attention_reference, runtime
from triton_guide.testing import tolerance

# (batch, heads, seq, head_dim): a single token, primes, powers of two plus one, several blocks.
SHAPES = runtime.pick(
    interpreter=[(1, 1, 1, 16), (1, 2, 17, 32), (2, 2, 33, 64), (1, 1, 65, 128), (1, 2, 48, 16)],
    gpu=[(1, 1, 1, 16), (1, 2, 17, 32), (2, 2, 33, 64), (1, 1, 65, 128), (1, 2, 48, 16),
         (2, 3, 1000, 64), (1, 4, 2049, 128), (2, 2, 4096, 64)],
)


def run_and_compare(q, k, v, causal, check, sm_scale=None, name="attention"):
    """Forward and backward through both implementations; compare out, dq, dk, dv."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = attention(q, k, v, causal=causal, sm_scale=sm_scale)
    expected = attention_reference(q64, k64, v64, causal=causal, sm_scale=sm_scale)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    expected.backward(grad_out.double())
    rtol = tolerance(q.dtype, tensor_cores=True)
    check(f"{name} forward", out, expected, rtol=rtol, name="out")
    # The backward pass uses Delta = rowsum(out * grad_out) with `out` already rounded to the
    # input dtype, so a row's gradient error scales with that row's |out|, largest for the
    # first rows of causal attention (few keys), not with the tensor's rms. Measure the
    # absolute part against the largest reference gradient (at least 0.1: with one token the
    # exact dq and dk are zero).
    for grad, expected_grad, label in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk"), (v.grad, v64.grad, "dv")):
        atol = rtol * max(expected_grad.abs().max().item(), 0.1)
        check(f"{name} backward", grad, expected_grad, rtol=rtol, atol=atol, name=label)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-H{}-N{}-D{}".format(*s))
def test_forward_and_backward_match_torch(shape, causal, dtype, device, check):
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    run_and_compare(q, k, v, causal, check)


@pytest.mark.parametrize("head_dim", [24, 48, 80, 96], ids=lambda d: f"D={d}")
def test_head_dim_not_a_power_of_two(head_dim, device, check):
    q, k, v = (torch.randn(1, 2, 37, head_dim, device=device) for _ in range(3))
    run_and_compare(q, k, v, True, check)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_strided_inputs_from_a_packed_projection(causal, device, check):
    # The usual layout out of a fused qkv projection: (batch, seq, 3, heads, head_dim).
    qkv = torch.randn(2, 41, 3, 4, 32, device=device)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    run_and_compare(q, k, v, causal, check)


def _layout(kind, device):
    """q, k, v that a TMA descriptor cannot read as they are (see attention._tma_layout)."""
    if kind == "head_dim_20_fp16":  # rows of 40 bytes: not a multiple of 16
        return [torch.randn(1, 2, 23, 20, device=device, dtype=torch.float16) for _ in range(3)]
    if kind == "storage_offset":  # base address 4 bytes past a 16-byte boundary
        return [torch.randn(2 * 23 * 32 + 1, device=device)[1:].view(1, 2, 23, 32)
                for _ in range(3)]
    # "expanded": one key/value head shared by three query heads (stride 0 along heads)
    q = torch.randn(1, 3, 23, 32, device=device)
    k, v = (torch.randn(1, 1, 23, 32, device=device).expand(1, 3, 23, 32) for _ in range(2))
    return [q, k, v]


@pytest.mark.parametrize("kind", ["head_dim_20_fp16", "storage_offset", "expanded"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_layouts_a_descriptor_cannot_read(kind, causal, device, check):
    attention_module = importlib.import_module("triton_guide.attention")
    q, k, v = _layout(kind, device)
    needs_copy = [attention_module._tma_layout(t) is not t for t in (q, k, v)]
    assert needs_copy == ([False, True, True] if kind == "expanded" else [True] * 3)
    run_and_compare(q, k, v, causal, check)


def test_custom_scale(device, check):
    q, k, v = (torch.randn(1, 2, 29, 32, device=device) for _ in range(3))
    run_and_compare(q, k, v, False, check, sm_scale=0.3)


def test_large_scores_stay_finite(device, check):
    # Scores of about +-100: exp() of them overflows float32 unless the row max is subtracted.
    # float16 inputs, whose products the tensor cores compute exactly (tf32 would round
    # float32 scores of this size by ~0.1).
    q, k, v = (torch.randn(1, 1, 50, 32, device=device) for _ in range(3))
    q, k, v = (q * 10).half().requires_grad_(), (k * 10).half(), v.half()
    out = attention(q, k, v, causal=True)
    expected = attention_reference(q.double(), k.double(), v.double(), causal=True)
    check("attention forward", out, expected, rtol=tolerance(torch.float16))
    # The softmax is almost one-hot here, so the exact gradient is nearly zero and rounding
    # dominates it: ask only that it stays finite.
    out.float().sum().backward()
    assert torch.isfinite(q.grad).all()


def test_default_scale_is_inverse_sqrt_head_dim(device, check):
    q, k, v = (torch.randn(1, 1, 20, 64, device=device) for _ in range(3))
    explicit = attention(q, k, v, sm_scale=1 / math.sqrt(64))
    check("attention forward", attention(q, k, v), explicit.double(), rtol=1e-6)


def make(shape=(1, 2, 8, 16), dtype=torch.float32, device=None):
    return torch.randn(shape, device=device, dtype=dtype)


def test_rejects_mismatched_shapes(device):
    with pytest.raises(ValueError, match="q and k must have the same shape"):
        attention(make(device=device), make((1, 2, 9, 16), device=device), make(device=device))


def test_rejects_wrong_rank(device):
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        attention(make((2, 8, 16), device=device), make(device=device), make(device=device))


@pytest.mark.parametrize("head_dim", [8, 256])
def test_rejects_head_dim_out_of_range(head_dim, device):
    q = make((1, 1, 8, head_dim), device=device)
    with pytest.raises(ValueError, match="head_dim"):
        attention(q, q, q)


def test_rejects_mismatched_dtypes(device):
    with pytest.raises(TypeError, match="q and v must have the same dtype"):
        attention(make(device=device), make(device=device), make(dtype=torch.float16, device=device))


def test_rejects_unsupported_dtype(device):
    q = make(dtype=torch.float64, device=device)
    with pytest.raises(TypeError, match="q has dtype"):
        attention(q, q, q)


def test_rejects_wrong_device(wrong_device, device):
    with pytest.raises(ValueError, match="k is on"):
        attention(make(device=device), make(device=wrong_device), make(device=device))


def test_rejects_empty(device):
    q = make((1, 2, 0, 16), device=device)
    with pytest.raises(ValueError, match="q is empty"):
        attention(q, q, q)


@pytest.mark.parametrize("sm_scale", [0.0, -1.0, float("nan")], ids=repr)
def test_rejects_bad_scale(sm_scale, device):
    q = make(device=device)
    with pytest.raises(ValueError, match="sm_scale"):
        attention(q, q, q, sm_scale=sm_scale)


@pytest.mark.parametrize("sm_scale", ["0.1", True], ids=repr)
def test_rejects_scale_that_is_not_a_number(sm_scale, device):
    q = make(device=device)
    with pytest.raises(TypeError, match="sm_scale must be a real number"):
        attention(q, q, q, sm_scale=sm_scale)


def test_rejects_non_bool_causal(device):
    q = make(device=device)
    with pytest.raises(TypeError, match="causal must be a bool"):
        attention(q, q, q, causal=1)
