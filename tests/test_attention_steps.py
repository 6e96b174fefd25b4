"""The attention ladder (triton_guide.attention_steps): each step against torch in float64."""

import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import attention_reference
from triton_guide.attention_steps import attention_online, attention_two_pass
from triton_guide.testing import tolerance

STEPS = [
    pytest.param(attention_two_pass, id="two_pass"),
    pytest.param(attention_online, id="online"),
]

# (batch, heads, seq, head_dim)
SHAPES = [
    pytest.param((1, 1, 1, 16), id="seq_of_1"),
    pytest.param((2, 3, 16, 32), id="one_block_exactly"),
    pytest.param((1, 2, 97, 64), id="seq_non_multiple_of_block"),
    pytest.param((1, 1, 33, 40), id="head_dim_non_power_of_two"),
    pytest.param((1, 1, 65, 128), id="head_dim_128"),
]


def expected(q, k, v, sm_scale=None):
    return attention_reference(q.double(), k.double(), v.double(), sm_scale=sm_scale)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("step", STEPS)
def test_step_matches_torch(step, shape, dtype, device, check):
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    rtol = tolerance(dtype, tensor_cores=True)
    check("attention steps", step(q, k, v), expected(q, k, v), rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_reads_strided_inputs(step, device, check):
    qkv = torch.randn(2, 41, 3, 2, 32, device=device)  # (batch, seq, 3, heads, head_dim)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    rtol = tolerance(torch.float32, tensor_cores=True)
    check("attention steps", step(q, k, v), expected(q, k, v), rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_reads_negative_bit_views(step, device, check):
    # _neg_view points at the un-negated values: read as they are, q and k's signs cancel
    # in the scores but v's does not.
    q, k, v = (torch.randn(1, 2, 19, 16, device=device)._neg_view() for _ in range(3))
    rtol = tolerance(torch.float32, tensor_cores=True)
    resolved = (t.resolve_neg() for t in (q, k, v))
    check("attention steps", step(q, k, v), expected(*resolved), rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_with_large_scores_and_growing_maxima(step, device, check):
    # Keys grow in norm along the sequence, so each row's maximum tends to sit in a late
    # key block and the running maximum keeps moving; scores reach a few tens, so the
    # weights span many orders of magnitude. (Scores in the hundreds would put the float32
    # rounding of the scores themselves above the 1e-5 tolerance.)
    q = torch.randn(1, 1, 50, 32, device=device) * 3
    growth = torch.linspace(1, 4, 50, device=device)[:, None]
    k = torch.randn(1, 1, 50, 32, device=device) * growth
    v = torch.randn(1, 1, 50, 32, device=device)
    rtol = tolerance(torch.float32, tensor_cores=True)
    check("attention steps", step(q, k, v), expected(q, k, v), rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_uses_the_given_scale(step, device, check):
    q, k, v = (torch.randn(1, 2, 23, 16, device=device) for _ in range(3))
    rtol = tolerance(torch.float32, tensor_cores=True)
    check("attention steps", step(q, k, v, sm_scale=0.9), expected(q, k, v, 0.9), rtol=rtol)


@pytest.mark.parametrize("step", STEPS)
def test_step_rejects_small_head_dim(step, device):
    q = torch.ones(1, 1, 4, 8, device=device)
    with pytest.raises(ValueError, match="head_dim .* must be between 16 and 128, got 8"):
        step(q, q, q)


@pytest.mark.parametrize("step", STEPS)
def test_step_rejects_different_shapes(step, device):
    q = torch.ones(1, 1, 4, 16, device=device)
    k = torch.ones(1, 1, 5, 16, device=device)
    with pytest.raises(ValueError, match="k"):
        step(q, k, q)
