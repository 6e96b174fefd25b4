import importlib
import math

import pytest
import torch

from conftest import FLOAT_DTYPES
from triton_guide import attention, attention_reference, runtime
from triton_guide.testing import tolerance

attention_module = importlib.import_module("triton_guide.attention")
decode_module = importlib.import_module("triton_guide.attention_decode")
tiles_module = importlib.import_module("triton_guide.attention_tiles")

# (batch, heads, seq, head_dim): a single token, primes, powers of two plus one, several blocks.
SHAPES = runtime.pick(
    interpreter=[(1, 1, 1, 16), (1, 2, 17, 32), (2, 2, 33, 64), (1, 1, 65, 128), (1, 2, 48, 16)],
    gpu=[(1, 1, 1, 16), (1, 2, 17, 32), (2, 2, 33, 64), (1, 1, 65, 128), (1, 2, 48, 16),
         (2, 3, 1000, 64), (1, 4, 2049, 128), (2, 2, 4096, 64)],
)


def rtol_for(dtype):
    """The relative tolerance for attention on ``dtype`` inputs: float32 on a GPU is as
    accurate as the tl.dot precision that PyTorch's float32 setting picks."""
    return tolerance(dtype, tensor_cores=True)


def run_and_compare(q, k, v, causal, check, sm_scale=None, name="attention", window=None,
                    lse=False):
    """Forward and backward through both implementations; compare out, dq, dk, dv (and
    the log-sum-exp and its gradient's effect when ``lse``)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    options = dict(causal=causal, sm_scale=sm_scale, window=window, return_lse=lse)
    got = attention(q, k, v, **options)
    expected = attention_reference(q64, k64, v64, **options)
    (out, out_lse), (ref, ref_lse) = (got, expected) if lse else ((got, None), (expected, None))
    grad_out = torch.randn_like(out)
    loss, ref_loss = (out * grad_out).sum(), (ref * grad_out.double()).sum()
    rtol = rtol_for(q.dtype)
    check(f"{name} forward", out, ref, rtol=rtol, name="out")
    if lse:
        check(f"{name} lse", out_lse, ref_lse, rtol=1e-5 if q.dtype == torch.float32 else rtol,
              name="lse")
        # Rows that see no key have log-sum-exp -inf; leave them out of the loss.
        grad_lse = torch.randn_like(out_lse).masked_fill(out_lse == -float("inf"), 0.0)
        loss = loss + (out_lse.masked_fill(out_lse == -float("inf"), 0.0) * grad_lse).sum()
        ref_loss = ref_loss + (ref_lse.masked_fill(ref_lse == -float("inf"), 0.0)
                               * grad_lse.double()).sum()
    loss.backward()
    ref_loss.backward()
    # The backward pass uses Delta = rowsum(out * grad_out) with `out` already rounded to the
    # input dtype, so a row's gradient error scales with that row's |out|, largest for the
    # first rows of causal attention (few keys), not with the tensor's rms. Measure the
    # absolute part against the largest reference gradient of the three (with one key, or
    # one token, the exact dq and dk are zero, and float32 leaves rounding of the size of
    # the other gradients times its epsilon; at least 0.1).
    largest = max(g.abs().max().item() for g in (q64.grad, k64.grad, v64.grad))
    for grad, expected_grad, label in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk"), (v.grad, v64.grad, "dv")):
        atol = rtol * max(expected_grad.abs().max().item(), largest / 4, 0.1)
        check(f"{name} backward", grad, expected_grad, rtol=rtol, atol=atol, name=label)
    return out, out_lse


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
    """q, k, v that a TMA descriptor cannot read as they are (see attention_tiles.tma_layout)."""
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
    q, k, v = _layout(kind, device)
    needs_copy = [tiles_module.tma_layout(t) is not t for t in (q, k, v)]
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


@pytest.mark.parametrize("k_shape, v_shape, message", [
    ((1, 2, 9, 16), (1, 2, 8, 16), "k and v must have the same shape"),
    ((2, 2, 8, 16), (2, 2, 8, 16), "k must have q's batch size and head_dim"),
    ((1, 2, 8, 32), (1, 2, 8, 32), "k must have q's batch size and head_dim"),
    ((1, 3, 8, 16), (1, 3, 8, 16), r"q's number of heads \(2\) must be a multiple of k's"),
], ids=["k_v_lengths_differ", "batch_differs", "head_dim_differs", "heads_not_a_multiple"])
def test_rejects_mismatched_shapes(k_shape, v_shape, message, device):
    with pytest.raises(ValueError, match=message):
        attention(make(device=device), make(k_shape, device=device), make(v_shape, device=device))


def test_rejects_wrong_rank(device):
    with pytest.raises(ValueError, match="q must have 4 dimensions"):
        attention(make((2, 8, 16), device=device), make(device=device), make(device=device))


@pytest.mark.parametrize("head_dim", [8, 15, 257, 320])
def test_rejects_head_dim_out_of_range(head_dim, device):
    q = make((1, 1, 8, head_dim), device=device)
    with pytest.raises(ValueError, match=f"head_dim .* must be between 16 and 256, got {head_dim}"):
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


# ---- Attention as models call it: unequal lengths, grouped heads, wide heads, windows ----

def qkv(batch, heads, kv_heads, num_queries, num_keys, head_dim, device, dtype=torch.float32):
    q = torch.randn(batch, heads, num_queries, head_dim, device=device, dtype=dtype)
    k, v = (torch.randn(batch, kv_heads, num_keys, head_dim, device=device, dtype=dtype)
            for _ in range(2))
    return q, k, v


# (num_queries, num_keys): odd lengths both ways, one query (decode), one key (equal
# lengths: SHAPES above).
LENGTHS = [(37, 53), (53, 37), (1, 45), (5, 70), (17, 1)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda n: "Nq{}-Nk{}".format(*n))
def test_unequal_lengths(lengths, causal, device, check):
    q, k, v = qkv(1, 2, 2, *lengths, 32, device)
    run_and_compare(q, k, v, causal, check)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_rows_that_see_no_key_give_zero(dtype, device, check):
    # 50 queries, 20 keys, causal bottom-right: query i sees keys j <= i - 30, so the first 30
    # see none. Their output is 0, their log-sum-exp -inf, and they add nothing to dk, dv.
    q, k, v = qkv(1, 2, 2, 50, 20, 32, device, dtype)
    out, lse = run_and_compare(q, k, v, True, check, lse=True)
    assert (out[:, :, :30] == 0).all()
    assert (lse[:, :, :30] == -float("inf")).all()
    assert torch.isfinite(lse[:, :, 30:]).all()


def test_causal_mask_is_bottom_right(device):
    # The reference's mask, drawn for 3 queries and 5 keys: the last query sees every key.
    expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(attention_module.visible_keys(3, 5, causal=True), expected)
    # And the kernel follows it: a value that only the hidden keys carry never shows up.
    q = torch.randn(1, 1, 3, 16, device=device)
    k = torch.randn(1, 1, 5, 16, device=device)
    v = torch.zeros(1, 1, 5, 16, device=device)
    v[0, 0, 3:] = 1000.0  # keys 3 and 4
    out = attention(q, k, v, causal=True)
    assert (out[0, 0, 0] == 0).all() and (out[0, 0, 1] > 0).all()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads, kv_heads, lengths", [
    (4, 2, (29, 41)), (6, 2, (41, 29)), (3, 1, (23, 23)), (4, 1, (3, 50)),
], ids=["GQA-2:1", "GQA-3:1-Nq>Nk", "MQA", "MQA-decode"])
def test_grouped_heads(heads, kv_heads, lengths, causal, device, check):
    q, k, v = qkv(1, heads, kv_heads, *lengths, 32, device)
    run_and_compare(q, k, v, causal, check)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("head_dim", [40, 160, 256], ids=lambda d: f"D={d}")
def test_wide_and_odd_head_dims(head_dim, dtype, device, check):
    q, k, v = qkv(1, 2, 1, 19, 27, head_dim, device, dtype)
    run_and_compare(q, k, v, True, check, lse=True)


@pytest.mark.parametrize("lengths, window", [
    ((37, 53), 1), ((37, 53), 16), ((53, 37), 4), ((3, 61), 1), ((3, 61), 16), ((3, 61), 100),
], ids=lambda value: f"window{value}" if isinstance(value, int) else "Nq{}-Nk{}".format(*value))
def test_sliding_window(lengths, window, device, check):
    q, k, v = qkv(1, 4, 2, *lengths, 16, device)
    run_and_compare(q, k, v, True, check, window=window, lse=True)


def test_window_keeps_the_last_window_keys(device):
    # 4 queries, 10 keys, window 3: query i sees keys i + 4, i + 5, i + 6.
    visible = attention_module.visible_keys(4, 10, causal=True, window=3)
    assert visible.sum(dim=1).tolist() == [3, 3, 3, 3]
    assert visible[0].nonzero().flatten().tolist() == [4, 5, 6]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_log_sum_exp_and_its_gradient(causal, device, check):
    q, k, v = qkv(1, 2, 1, 41, 29, 32, device)
    run_and_compare(q, k, v, causal, check, lse=True)


def test_log_sum_exp_alone_is_differentiable(device, check):
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 2, 9, 21, 16, device))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    attention(q, k, v, return_lse=True)[1].sum().backward()
    attention_reference(q64, k64, v64, return_lse=True)[1].sum().backward()
    for ours, ref, label in ((q, q64, "dq"), (k, k64, "dk")):
        check("attention lse backward", ours.grad, ref.grad, rtol=rtol_for(q.dtype),
              atol=1e-6, name=label)
    assert v64.grad is None and (v.grad == 0).all()  # the log-sum-exp does not depend on v


@pytest.mark.parametrize("window, message", [
    (0, "window must be a positive number of keys"), (-3, "window must be a positive"),
    (2.0, "window must be an int or None"), (True, "window must be an int or None"),
])
def test_rejects_bad_window(window, message, device):
    q = make(device=device)
    with pytest.raises((TypeError, ValueError), match=message):
        attention(q, q, q, causal=True, window=window)


def test_rejects_window_without_causal(device):
    q = make(device=device)
    with pytest.raises(ValueError, match="window is supported with causal=True only"):
        attention(q, q, q, window=4)


def test_rejects_non_bool_return_lse(device):
    q = make(device=device)
    with pytest.raises(TypeError, match="return_lse must be a bool"):
        attention(q, q, q, return_lse=1)


# ---- Extreme but finite scales (issue: NaN where the answer is finite) ----

# sm_scale 1e-50 is 0 in float32 (every score 0: the mean of the visible values), 1e20 makes
# the softmax one-hot; both must match float64, on the main path and the decode path, with
# masked keys in play (odd lengths, causal).
EXTREME_SCALES = [1e-50, 1e-6, 1e3, 1e20, 1e38]


# Scores times 1e38 overflow to -inf on the way to exp2 (numpy warns under the interpreter).
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("lengths", [(37, 53), (3, 53)], ids=["main", "decode"])
@pytest.mark.parametrize("sm_scale", EXTREME_SCALES, ids=lambda s: f"scale={s:g}")
def test_extreme_scales_forward(sm_scale, lengths, device, check):
    q, k, v = qkv(1, 2, 1, *lengths, 16, device, torch.float16)
    out, lse = attention(q, k, v, causal=True, sm_scale=sm_scale, return_lse=True)
    ref, ref_lse = attention_reference(*(t.double() for t in (q, k, v)), causal=True,
                                       sm_scale=sm_scale, return_lse=True)
    assert torch.isfinite(out).all()
    check("attention extreme scale", out, ref, rtol=tolerance(torch.float16), name="out")
    # The log-sum-exp is about sm_scale * max score: float32 holds it up to ~3.4e38.
    representable = ref_lse.abs() < 3e38
    check("attention extreme scale", lse[representable], ref_lse[representable], rtol=1e-3,
          name="lse")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
# Scales that make every row one-hot (1e20, 1e38) or uniform (1e-50, 1e-6). In between
# (see the next test) the answer is as sensitive to the scores' rounding as sm_scale is large.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("sm_scale", [1e-50, 1e-6, 1e20, 1e38], ids=lambda s: f"scale={s:g}")
def test_extreme_scales_backward(sm_scale, dtype, device, check):
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 1, 23, 37, 16, device, dtype))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(q.shape, device=device, dtype=dtype)
    attention(q, k, v, causal=True, sm_scale=sm_scale).backward(grad_out)
    attention_reference(q64, k64, v64, causal=True, sm_scale=sm_scale).backward(grad_out.double())
    rtol = rtol_for(q.dtype)
    for grad in (q.grad, k.grad, v.grad):
        assert torch.isfinite(grad).all()
    check("attention extreme scale backward", v.grad, v64.grad, rtol=rtol, name="dv")
    # dq and dk are sm_scale times p * (dP - delta): where the softmax is one-hot, the
    # bracket's float32 rounding times 1e20 would swamp the exact answer, about 0 (see
    # attention_backward); they must match float64 like any gradient.
    for ours, ref, label in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk")):
        atol = rtol * max(ref.abs().max().item(), 0.1)
        check("attention extreme scale backward", ours, ref, rtol=rtol, atol=atol, name=label)


@pytest.mark.parametrize("dtype, sm_scale", [
    (torch.float32, 1e3), (torch.float32, 1e20), (torch.float16, 1e3),
], ids=["float32-scale=1e3", "float32-scale=1e20", "float16-scale=1e3"])
def test_tied_scores_at_large_scales(dtype, sm_scale, device, check):
    # Small integers for q and k: every score is an exact integer, so at these scales each
    # row is one-hot or splits evenly among tied best keys, and float32 rounds none of it.
    # The gradients of tied rows are sm_scale times O(1) (float16 cannot hold 1e20 of them).
    # Between ties and one-hot rows (best keys ~1e-3 apart at scale 1e3) the answer is as
    # sensitive to the scores' rounding as the scale is large; that is not tested here.
    q, k = (torch.randint(-1, 2, shape, device=device).to(dtype)
            for shape in ((1, 2, 23, 16), (1, 1, 37, 16)))
    v = torch.randn(1, 1, 37, 16, device=device, dtype=dtype)
    expected = attention_reference(q.double(), k.double(), v.double(), causal=True,
                                   sm_scale=sm_scale, return_lse=True)
    assert (expected[0] != 0).any()
    run_and_compare(q, k, v, True, check, sm_scale=sm_scale, name="attention ties")


def test_rejects_scale_beyond_float32(device):
    q = make(device=device)
    with pytest.raises(ValueError, match="sm_scale is 1e\\+39, but the kernels scale scores"):
        attention(q, q, q, sm_scale=1e39)


def test_rejects_scale_too_large_for_a_float(device):
    q = make(device=device)
    with pytest.raises(ValueError, match="sm_scale must be a positive finite number no larger"):
        attention(q, q, q, sm_scale=10**400)


# ---- float32 follows torch.get_float32_matmul_precision() ----

@pytest.fixture
def float32_precision():
    """Set torch's float32 matmul precision for one test; restore it afterwards."""
    before = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(before)


@pytest.fixture
def launch_constexprs(monkeypatch):
    """The DOT_PRECISION each attention kernel is launched with, in launch order (the main
    kernels' launches and flash-decoding's)."""
    seen = []
    real_fast_launch = attention_module.fast_launch

    def spied_fast_launch(kernel):
        launcher = real_fast_launch(kernel)

        class Spy:
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    if "DOT_PRECISION" in kwargs:
                        name = getattr(kernel, "fn", kernel).__name__
                        seen.append((name, kwargs["DOT_PRECISION"]))
                    return launcher[grid](*args, **kwargs)
                return launch

        return Spy()

    for module in (attention_module, decode_module):
        monkeypatch.setattr(module, "fast_launch", spied_fast_launch)
    return seen


@pytest.mark.parametrize("setting, expected", [
    ("highest", "tf32x3"), ("high", "tf32"), ("medium", "tf32"),
])
@pytest.mark.parametrize("lengths", [(29, 37), (2, 37)], ids=["main", "decode"])
def test_float32_follows_torch_matmul_precision(setting, expected, lengths, float32_precision,
                                                launch_constexprs, device, check):
    float32_precision(setting)
    q, k, v = qkv(1, 2, 1, *lengths, 32, device)
    run_and_compare(q, k, v, True, check)
    kernels = [name for name, _ in launch_constexprs]
    assert ("attention_decode_split_kernel" in kernels) == (lengths[0] <= 16)
    assert {"attention_backward_dkdv_kernel", "attention_backward_dq_kernel"} <= set(kernels)
    assert {precision for _, precision in launch_constexprs} == {expected}


def test_16_bit_inputs_keep_the_default_dot_precision(float32_precision, launch_constexprs, device):
    float32_precision("highest")
    q, k, v = qkv(1, 2, 2, 20, 20, 16, device, torch.float16)
    attention(q, k, v)
    assert launch_constexprs == [("attention_forward_kernel", "tf32")]


# ---- the registered operators: autograd and torch.compile ----

def test_operators_pass_opcheck(device):
    q, k, v = (t.requires_grad_() for t in qkv(1, 4, 2, 5, 9, 16, device))
    torch.library.opcheck(torch.ops.triton_guide.attention_forward.default,
                          (q, k, v, True, 0.25, 3))
    # The backward operator has no derivative of its own (Operator with backward=None): check it
    # on inputs that do not require gradients.
    q, k, v = (t.detach() for t in (q, k, v))
    out, lse, stats = torch.ops.triton_guide.attention_forward(q, k, v, True, 0.25, 3)
    grads = (torch.randn_like(out), torch.randn_like(lse))
    torch.library.opcheck(torch.ops.triton_guide.attention_backward.default,
                          (*grads, q, k, v, out, stats, True, 0.25, 3))


def test_compiled_grouped_windowed_call_matches_eager(device, check):
    q, k, v = (t.requires_grad_() for t in qkv(1, 4, 2, 7, 19, 16, device))

    def loss(q, k, v):
        out, lse = attention(q, k, v, causal=True, window=5, return_lse=True)
        return out.square().sum() + lse.sum()

    eager = torch.autograd.grad(loss(q, k, v), (q, k, v))
    compiled = torch.autograd.grad(torch.compile(loss, fullgraph=True)(q, k, v), (q, k, v))
    for ours, ref, label in zip(compiled, eager, ("dq", "dk", "dv")):
        check("attention compiled backward", ours, ref.double(), rtol=1e-6, atol=1e-6, name=label)


@pytest.mark.filterwarnings("ignore:Lower right causal bias will produce NaNs")
@pytest.mark.parametrize("lengths", [(5, 12), (12, 5), (9, 9)], ids=lambda n: "Nq{}-Nk{}".format(*n))
def test_reference_matches_torch_causal_lower_right(lengths):
    # The reference's causal mask is PyTorch's bottom-right one (CausalBias), computed on
    # the CPU in float64 by PyTorch's own math.
    from torch.nn.attention.bias import causal_lower_right

    q = torch.randn(1, 2, lengths[0], 16, dtype=torch.float64)
    k, v = (torch.randn(1, 2, lengths[1], 16, dtype=torch.float64) for _ in range(2))
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=causal_lower_right(*lengths))
    got = attention_reference(q, k, v, causal=True)
    # PyTorch gives NaN (or 0, by version) where a query sees no key; the reference gives 0.
    sees_any = attention_module.visible_keys(*lengths, causal=True).any(dim=1)
    torch.testing.assert_close(got[:, :, sees_any], expected[:, :, sees_any])
    assert (got[:, :, ~sees_any] == 0).all()
