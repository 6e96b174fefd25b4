"""Attention against PyTorch's ``scaled_dot_product_attention`` (SDPA): SDPA forced onto
one backend at a time, as baselines (:func:`sdpa_backends`), and a sweep over sequence
lengths of attention functions beside them, forward or backward, full or causal
(:func:`attention_sweep`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .timing import tflop_per_s
from .variants import random_inputs, random_inputs_backward

# Each baseline's name, as pages print it and recordings hold it, and its SDPA backend:
# FlashAttention-2 (written for the GPUs before Hopper) and cuDNN's attention.
SDPA_BACKENDS = {"SDPA flash": "FLASH_ATTENTION", "SDPA cuDNN": "CUDNN_ATTENTION"}
# The FLOPs of a backward pass over its forward's: five matrix products of the same shape
# (S recomputed, dV, dP, dQ, dK) against the forward's two (S, then P V).
BACKWARD_FLOPS_OVER_FORWARD = 2.5


def sdpa_backends(causal: bool = False) -> dict[str, Callable]:
    """SDPA forced onto each backend of :data:`SDPA_BACKENDS`, keyed by the baseline's
    name: each takes ``(q, k, v)`` and applies the causal mask when ``causal``. A backend
    that cannot take the inputs raises instead of falling back to another."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def forced(backend):
        def sdpa(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return sdpa
    return {name: forced(getattr(SDPBackend, backend))
            for name, backend in SDPA_BACKENDS.items()}


def attention_sweep(bench, variants: dict[str, Callable], lengths: Sequence[int], *,
                    batch: int, heads: int, head_dim: int, causal: bool = False,
                    backward: bool = False, title: str | None = None):
    """Time ``variants`` (name -> attention function) and then :func:`sdpa_backends` with
    :meth:`~triton_guide.benchmark.Benchmark.sweep` of ``bench``, at each sequence length
    ``n`` of ``lengths``, on fresh standard-normal float16 q, k and v of shape
    ``(batch, heads, n, head_dim)``; return its :class:`~triton_guide.benchmark.Results`
    (recorded runs where nothing is timed).

    A variant is called as ``fn(q, k, v)``, or ``fn(q, k, v, causal=True)`` when
    ``causal``. The forward times that call (:func:`random_inputs`); ``backward`` times
    ``torch.autograd.grad`` of its output with respect to q, k and v
    (:func:`random_inputs_backward`). Each is called once first, so that compiling and
    autotuning are not timed. The rate is in TFLOP/s under the ``gemm_fp16`` ceiling,
    counting the forward's ``4 batch heads n^2 head_dim`` FLOPs, halved when causal, and
    :data:`BACKWARD_FLOPS_OVER_FORWARD` times that for the backward (products a kernel
    computes twice count once). ``title`` defaults to
    ``"attention <forward|backward>, <full|causal>, d=<head_dim>"``."""
    import torch

    from ..traffic import attention_cost

    def qkv(n):
        return (batch, heads, n, head_dim)

    def flops(n):
        forward = attention_cost(batch, heads, n, head_dim, causal=causal).flops
        return forward * (BACKWARD_FLOPS_OVER_FORWARD if backward else 1)

    make = random_inputs_backward if backward else random_inputs
    calls = {name: (lambda q, k, v, fn=fn: fn(q, k, v, causal=True)) if causal else fn
             for name, fn in variants.items()}
    calls.update(sdpa_backends(causal))
    title = title or (f"attention {'backward' if backward else 'forward'}, "
                      f"{'causal' if causal else 'full'}, d={head_dim}")
    return bench.sweep(
        title, list(lengths),
        {name: make(fn, qkv, qkv, qkv, dtype=torch.float16, warm=True)
         for name, fn in calls.items()},
        lambda n, ms: tflop_per_s(flops(n), ms), label="N", unit="TFLOP/s",
        ceiling="gemm_fp16", xlabel="sequence length")
