"""Flash-decoding (triton_guide.attention_decode): few queries against many keys,
the keys split across programs and the partial results combined. Each case is checked
against the float64 reference with the split forced, so that several splits, empty splits
and splits that end in a partial block of keys all occur at interpreter-sized shapes."""

import importlib

import pytest
import torch

from triton_guide import attention, attention_reference
from triton_guide.testing import tolerance

attention_module = importlib.import_module("triton_guide.attention")
decode_module = importlib.import_module("triton_guide.attention_decode")


def qkv(batch, heads, kv_heads, num_queries, num_keys, head_dim, device, dtype=torch.float32):
    q = torch.randn(batch, heads, num_queries, head_dim, device=device, dtype=dtype)
    k, v = (torch.randn(batch, kv_heads, num_keys, head_dim, device=device, dtype=dtype)
            for _ in range(2))
    return q, k, v


def check_decode(q, k, v, check, causal=False, window=0, num_splits=None, sm_scale=0.3):
    out, lse, stats = decode_module.attention_decode(q, k, v, causal, sm_scale, window,
                                                        num_splits=num_splits)
    ref, ref_lse = attention_reference(*(t.double() for t in (q, k, v)), causal=causal,
                                       sm_scale=sm_scale, window=window or None,
                                       return_lse=True)
    rtol = tolerance(q.dtype, tensor_cores=True)  # follows PyTorch's float32 setting
    check("attention decode", out, ref, rtol=rtol, name="out")
    check("attention decode", lse, ref_lse, rtol=1e-5 if q.dtype == torch.float32 else rtol,
          name="lse")
    # The statistics the backward reads are the main kernel's: compare with it.
    if q.shape[2] > 0:
        _, _, main_stats = main_path_forward(q, k, v, causal, sm_scale, window)
        torch.testing.assert_close(stats, main_stats, rtol=1e-5, atol=1e-5)
    return out, lse


def main_path_forward(q, k, v, causal, sm_scale, window):
    """The main forward kernel on the same inputs (attention_forward without the decode
    branch)."""
    original = attention_module.uses_decode
    attention_module.uses_decode = lambda q, k: False
    try:
        return attention_module.attention_forward(q, k, v, causal, sm_scale, window)
    finally:
        attention_module.uses_decode = original


# (heads, kv_heads, num_queries, num_keys, num_splits): one query, several, GQA 4:1, MQA,
# more splits than blocks of keys, a split count that leaves the last split short, one
# split (stored by the split kernel, no combine).
CASES = [
    (2, 2, 1, 77, 3), (8, 2, 1, 130, 4), (4, 1, 3, 61, 2), (4, 2, 16, 45, 5),
    (2, 1, 5, 40, 7), (2, 2, 2, 300, 1),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "H{}-Hk{}-Nq{}-Nk{}-splits{}".format(*c))
def test_split_keys_match_float64(case, causal, device, check):
    heads, kv_heads, num_queries, num_keys, splits = case
    q, k, v = qkv(1, heads, kv_heads, num_queries, num_keys, 32, device)
    check_decode(q, k, v, check, causal=causal, num_splits=splits)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_more_splits_than_the_combine_merges_at_once(causal, device, check):
    # Head dim 256 in float32: the combine merges 16 splits per step; 300 keys in 19
    # splits of 16 take two steps, the second with 3 of its 16 present.
    q, k, v = qkv(1, 4, 2, 1, 300, 256, device)
    check_decode(q, k, v, check, causal=causal, num_splits=20)


@pytest.mark.parametrize("window", [1, 7, 50])
def test_split_keys_with_a_window(window, device, check):
    # With a long cache and a short window most splits see no key at all.
    q, k, v = qkv(1, 4, 2, 4, 150, 16, device)
    check_decode(q, k, v, check, causal=True, window=window, num_splits=6)


def test_more_queries_than_keys(device, check):
    # Causal, 9 queries, 4 keys: the first 5 queries see nothing and give 0.
    q, k, v = qkv(1, 2, 1, 9, 4, 16, device)
    out, lse = check_decode(q, k, v, check, causal=True, num_splits=2)
    assert (out[:, :, :5] == 0).all() and (lse[:, :, :5] == -float("inf")).all()


@pytest.mark.parametrize("head_dim", [40, 160, 256], ids=lambda d: f"D={d}")
def test_head_dims(head_dim, device, check):
    q, k, v = qkv(1, 2, 1, 2, 70, head_dim, device, torch.float16)
    check_decode(q, k, v, check, causal=True, num_splits=3)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("sm_scale", [1e-50, 1e20], ids=lambda s: f"scale={s:g}")
def test_extreme_scales(sm_scale, device, check):
    q, k, v = qkv(1, 4, 2, 2, 90, 16, device, torch.float16)
    out, _ = check_decode(q, k, v, check, causal=True, num_splits=4, sm_scale=sm_scale)
    assert torch.isfinite(out).all()


def test_strided_and_expanded_inputs(device, check):
    # Keys and values of one head expanded over the batch (stride 0), queries transposed.
    q = torch.randn(2, 3, 4, 16, device=device).transpose(1, 2)  # (2, 4, 3, 16), strided
    k, v = (torch.randn(1, 2, 50, 16, device=device).expand(2, 2, 50, 16) for _ in range(2))
    check_decode(q, k, v, check, causal=True, num_splits=3)


def test_split_choice_fills_the_gpu():
    # 132 SMs (an H100): batch 1 with 4 kv heads at 32k keys asks for 66 splits per head,
    # 497 keys each, rounded up to whole blocks of 64: 64 splits of 512.
    splits, keys_per_split = decode_module.decode_splits(4, 32768, 64, 132)
    assert (splits, keys_per_split) == (64, 512)
    assert splits * keys_per_split >= 32768 > (splits - 1) * keys_per_split
    # A batch large enough to fill the GPU on its own is not split.
    assert decode_module.decode_splits(256, 4096, 64, 132) == (1, 4096)
    # No split shorter than the minimum, even when the GPU would want more programs.
    splits, keys_per_split = decode_module.decode_splits(1, 1000, 64, 132)
    assert keys_per_split >= decode_module.DECODE_MIN_KEYS_PER_SPLIT


@pytest.mark.parametrize("num_queries, decode", [(1, True), (16, True), (17, False)])
def test_attention_takes_the_decode_path_for_few_queries(num_queries, decode, device,
                                                         monkeypatch, check):
    calls = []
    real = attention_module.attention_decode
    monkeypatch.setattr(attention_module, "attention_decode",
                        lambda *args, **kw: calls.append(args) or real(*args, **kw))
    q, k, v = (t.requires_grad_() for t in qkv(1, 4, 2, num_queries, 40, 16, device))
    out = attention(q, k, v, causal=True)
    assert bool(calls) == decode
    # The backward reads the decode path's statistics: it must match float64 too.
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    attention_reference(q64, k64, v64, causal=True).backward(grad_out.double())
    for ours, ref, label in ((q.grad, q64.grad, "dq"), (k.grad, k64.grad, "dk"), (v.grad, v64.grad, "dv")):
        check("attention decode backward", ours, ref, rtol=1e-5, atol=1e-6, name=label)
