"""Every kind of tensor and argument a PyTorch user can pass: handled, or refused by name."""

import sys

import numpy as np

import pytest
import torch

from triton_guide import (
    attention,
    attention_reference,
    cross_entropy,
    layer_norm,
    matmul,
    rms_norm,
    runtime,
    softmax,
    transpose,
    vector_add,
    vector_sum,
)
from triton_guide.copy import copy, copy_matrix
from triton_guide.debugging import checked_sqrt
from triton_guide.testing import tolerance
from triton_guide.validation import check_block_size, max_block_size

# op name -> (call with one tensor argument x of the given shape, reference, shape of x)
OPS = {
    "vector_add": (lambda x: vector_add(x, x), lambda x: x + x, (3, 11)),
    "softmax": (softmax, lambda x: torch.softmax(x, -1), (5, 33)),
    "transpose": (transpose, lambda x: x.t(), (5, 33)),
    "matmul": (lambda x: matmul(x, x), lambda x: x @ x, (6, 6)),
    "attention": (lambda x: attention(x, x, x), lambda x: attention_reference(x, x, x), (1, 2, 9, 16)),
}
OP_NAMES = list(OPS)


def neg_view(shape, device):
    """A public-API float view with the negative bit set: the imaginary part of a conjugate."""
    z = torch.randn(shape, dtype=torch.complex64, device=device)
    view = z.conj().imag
    assert view.is_neg()
    return view


@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("kind", ["conj_imag", "private_neg_view"])
def test_negative_bit_views_are_resolved(op, kind, device, check):
    call, reference, shape = OPS[op]
    if kind == "conj_imag" and op != "vector_add":
        x = neg_view(shape, device)
    else:  # vector_add takes contiguous tensors only; conj().imag is strided
        x = torch.randn(shape, device=device)._neg_view()
    assert x.is_neg()
    check(op, call(x), reference(x.resolve_neg().double()), rtol=tolerance(torch.float32, tensor_cores=True))


# The package's other launchers, each with a float32 tensor argument x: (call, reference).
MORE_OPS = {
    "copy": (lambda x: copy(x), lambda x: x),
    "copy_matrix": (lambda x: copy_matrix(x), lambda x: x),
    "vector_sum": (lambda x: vector_sum(x), lambda x: x.sum()),
    "cross_entropy": (lambda x: cross_entropy(x, torch.arange(x.shape[0], device=x.device)),
                      lambda x: torch.nn.functional.cross_entropy(
                          x, torch.arange(x.shape[0], device=x.device))),
    "layer_norm": (lambda x: layer_norm(x, torch.ones_like(x[0])),
                   lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:])),
    "rms_norm": (lambda x: rms_norm(x, torch.ones_like(x[0]), eps=1e-6),
                 lambda x: torch.nn.functional.rms_norm(x, x.shape[-1:], eps=1e-6)),
}


@pytest.mark.parametrize("op", list(MORE_OPS))
def test_negative_bit_views_are_resolved_by_the_other_ops(op, device, check):
    call, reference = MORE_OPS[op]
    x = torch.randn(5, 33, device=device)._neg_view()
    assert x.is_neg()
    x64 = x.resolve_neg().double()
    rtol = tolerance(torch.float32)
    # A sum of random-sign values can land near zero by chance: its error is measured
    # against ||x||_2, the sum's typical size, as tests/test_reduction.py does.
    atol = rtol * x64.norm().item() if op == "vector_sum" else 0.0
    check(op, call(x), reference(x64), rtol=rtol, atol=atol)


NON_STRIDED = {
    "sparse_coo": (lambda x: x.to_sparse(), TypeError, "has layout torch.sparse_coo.*to_dense"),
    "sparse_csr": (lambda x: x.to_sparse_csr(), TypeError, "has layout torch.sparse_csr.*to_dense"),
    "meta": (lambda x: x.to("meta"), ValueError, "is on meta: a meta tensor has a shape but no data"),
    "nested": (
        lambda x: torch.nested.nested_tensor([x, x], layout=torch.jagged),
        TypeError, "is a nested tensor.*to_padded_tensor",
    ),
}


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("kind", list(NON_STRIDED))
def test_non_strided_tensors_are_refused_by_name(op, kind, device):
    call, _, shape = OPS[op]
    convert, error, message = NON_STRIDED[kind]
    x = torch.randn(shape, device=device)
    if kind == "sparse_csr" and op == "attention":
        x = x[0, 0]  # CSR is two-dimensional; the rank check must not be what refuses it
    with pytest.raises(error, match=message):
        call(convert(x))


@pytest.mark.skipif(runtime.interpreting(), reason="needs a GPU: interpreter tensors are on cpu, which has no index")
@pytest.mark.parametrize("op", OP_NAMES)
def test_tensors_on_another_gpu_are_refused_by_name(op, device, monkeypatch):
    """Kernels launch on the current device; a tensor on another GPU would be read from the wrong one."""
    call, _, shape = OPS[op]
    x = torch.randn(shape, device=device)
    other = x.device.index + 1 if x.device.index is not None else 1
    # One GPU is enough: make the current device another one than x's.
    monkeypatch.setattr(sys.modules["triton_guide.validation"], "_current_cuda_device",
                        lambda: other)
    with pytest.raises(ValueError, match=rf"is on cuda:\d, but kernels launch on the current device, cuda:{other}"):
        call(x)


@pytest.mark.parametrize("op", OP_NAMES)
def test_vmap_batched_tensors_are_refused_by_name(op, device):
    call, _, shape = OPS[op]
    batch = torch.randn(2, *shape, device=device)
    with pytest.raises(TypeError, match="batched tensor from torch.func.vmap.*outside vmap"):
        torch.func.vmap(call)(batch)


# Tuning arguments: (call, expected error, message)
BAD_TUNING = {
    "vector_add_block_2**21": (
        lambda x: vector_add(x, x, block_size=2**21), ValueError,
        "block_size is 2097152, but a Triton block holds at most 1048576",
    ),
    "vector_add_block_float": (
        lambda x: vector_add(x, x, block_size=64.0), TypeError, "block_size must be an int.*float",
    ),
    "vector_add_block_none": (
        lambda x: vector_add(x, x, block_size=None), TypeError, "block_size must be an int.*NoneType",
    ),
    "vector_add_block_str": (
        lambda x: vector_add(x, x, block_size="64"), TypeError, "block_size must be an int.*str",
    ),
    "vector_add_block_bool": (
        lambda x: vector_add(x, x, block_size=True), TypeError, "block_size must be an int.*bool",
    ),
    "softmax_online_block_2**21": (
        lambda x: softmax(x.view(3, 11), method="online", block_size=2**21), ValueError,
        "block_size is 2097152, but a Triton block holds at most",
    ),
    "softmax_online_block_str": (
        lambda x: softmax(x.view(3, 11), method="online", block_size="64"), TypeError,
        "block_size must be an int",
    ),
    "softmax_method_none": (
        lambda x: softmax(x.view(3, 11), method=None), TypeError, "method must be a str",
    ),
    "transpose_tile_2048x1024": (
        lambda x: transpose(x.view(3, 11), block_rows=2048, block_cols=1024), ValueError,
        "2048 x 1024 holds 2097152 elements, but a Triton block holds at most 1048576",
    ),
    "transpose_block_float": (
        lambda x: transpose(x.view(3, 11), block_rows=16.0), TypeError, "block_rows must be an int",
    ),
    "transpose_block_not_power_of_two": (
        lambda x: transpose(x.view(3, 11), block_cols=24), ValueError,
        "block_cols must be a power of two, got 24; try 32",
    ),
    # Past MAX_ELEMENTS_PER_THREAD (256) elements per thread: accepted before, and natively
    # block_size=2**20 was still compiling after minutes.
    "vector_add_block_2**20": (
        lambda x: vector_add(x, x, block_size=2**20), ValueError,
        "block_size is 1048576: launched with 4 warps of 32 threads, that is 8192 elements "
        "per thread, more than the 256 .*; pass block_size=32768 or less",
    ),
    "vector_add_block_2**16": (
        lambda x: vector_add(x, x, block_size=2**16), ValueError,
        "block_size is 65536: .* 512 elements per thread.*pass block_size=32768 or less",
    ),
    "copy_block_16384_one_warp": (
        lambda x: copy(x, block_size=16384, num_warps=1), ValueError,
        "block_size is 16384: launched with 1 warp of 32 threads, that is 512 elements per thread.*"
        "pass block_size=8192 or less",
    ),
    "copy_matrix_block_2**16": (
        lambda x: copy_matrix(x.view(3, 11), block_size=2**16), ValueError,
        "block_size is 65536: .*pass block_size=32768 or less",
    ),
    "vector_sum_block_2**16": (
        lambda x: vector_sum(x, block_size=2**16), ValueError,
        "block_size is 65536: .*pass block_size=32768 or less",
    ),
    "vector_sum_atomic_block_2**16": (
        lambda x: vector_sum(x, method="atomic", block_size=2**16), ValueError,
        "block_size is 65536: .*pass block_size=32768 or less",
    ),
    "softmax_online_block_2**20": (  # 32 warps for blocks this wide
        lambda x: softmax(x.view(3, 11), method="online", block_size=2**20), ValueError,
        "block_size is 1048576: launched with 32 warps.*more than the 128 .*"
        "pass block_size=131072 or less",
    ),
    "cross_entropy_block_2**16": (  # 8 warps for blocks this wide
        lambda x: cross_entropy(x.view(3, 11), torch.zeros(3, dtype=torch.long, device=x.device),
                                block_size=2**16), ValueError,
        "block_size is 65536: launched with 8 warps.*more than the 128 .*"
        "pass block_size=32768 or less",
    ),
    "transpose_tile_256x256": (
        lambda x: transpose(x.view(3, 11), block_rows=256, block_cols=256), ValueError,
        "block_rows x block_cols = 256 x 256 is 65536: .* 512 elements per thread.*"
        "make the product 32768 or less",
    ),
    "checked_sqrt_block_2**16": (
        lambda x: checked_sqrt(x.abs(), block_size=2**16), ValueError,
        "block_size is 65536: .*pass block_size=32768 or less",
    ),
}


@pytest.mark.parametrize("case", list(BAD_TUNING))
def test_tuning_arguments_are_checked_by_name(case, device):
    call, error, message = BAD_TUNING[case]
    with pytest.raises(error, match=message):
        call(torch.randn(33, device=device))


@pytest.mark.parametrize(
    "call,reference",
    [
        (lambda x: vector_add(x, x, block_size=np.int64(16)), lambda x: x + x),
        (lambda x: softmax(x, method="online", block_size=np.int32(8)), lambda x: torch.softmax(x, -1)),
        (lambda x: transpose(x, block_rows=np.int64(8), block_cols=np.int16(4)), lambda x: x.t()),
    ],
    ids=["vector_add_numpy_int64", "softmax_numpy_int32", "transpose_numpy_int64_int16"],
)
def test_numpy_integer_block_sizes_are_accepted(call, reference, device, check):
    x = torch.randn(6, 21, device=device)
    check("numpy tuning", call(x), reference(x.double()), rtol=1e-5)


@pytest.mark.parametrize(
    "call,reference",
    [
        (lambda x: vector_add(x, x, block_size=32768), lambda x: x + x),
        # the performance page's widest block on one warp: 256 elements per thread
        (lambda x: copy(x, block_size=8192, num_warps=1), lambda x: x),
        (lambda x: softmax(x.view(3, 11), method="online", block_size=2**17),
         lambda x: torch.softmax(x.view(3, 11), -1)),
        (lambda x: cross_entropy(x.view(3, 11), torch.zeros(3, dtype=torch.long, device=x.device),
                                 block_size=2**15),
         lambda x: torch.nn.functional.cross_entropy(
             x.view(3, 11), torch.zeros(3, dtype=torch.long, device=x.device))),
    ],
    ids=["vector_add_32768", "copy_8192_one_warp", "softmax_online_2**17", "cross_entropy_2**15"],
)
def test_block_sizes_at_the_cap_are_accepted(call, reference, device, check):
    x = torch.randn(33, device=device)
    check("largest block", call(x), reference(x.double()), rtol=tolerance(torch.float32))


@pytest.mark.parametrize("per_thread", [128, 256])
@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16, 32])
def test_the_block_size_cap_follows_the_warps(num_warps, per_thread):
    largest = max_block_size(num_warps, per_thread)
    assert largest == min(2**20, per_thread * 32 * num_warps)
    check = dict(num_warps=num_warps, per_thread=per_thread)
    assert check_block_size("block_size", largest, **check) == largest
    if largest < 2**20:
        with pytest.raises(ValueError, match=f"pass block_size={largest} or less"):
            check_block_size("block_size", 2 * largest, **check)


def test_attention_accepts_numpy_bool_and_numpy_float(device, check):
    q, k, v = (torch.randn(1, 2, 13, 16, device=device) for _ in range(3))
    out = attention(q, k, v, causal=np.bool_(True), sm_scale=np.float32(0.5))
    expected = attention_reference(q.double(), k.double(), v.double(), causal=True, sm_scale=0.5)
    check("attention", out, expected, rtol=tolerance(torch.float32, tensor_cores=True))


@pytest.mark.parametrize("causal", [1, "yes", None], ids=repr)
def test_attention_causal_must_be_a_bool(causal, device):
    q = torch.randn(1, 1, 4, 16, device=device)
    with pytest.raises(TypeError, match="causal must be a bool"):
        attention(q, q, q, causal=causal)


def test_transpose_refuses_grid_wider_than_cuda_allows(device):
    # 65536 column blocks of 32 would exceed CUDA's limit of 65535 on grid axis 1.
    x = torch.empty(1, 65536 * 32, device=device)
    with pytest.raises(ValueError, match="at most 65535 there; pass a larger block_cols"):
        transpose(x)


def test_attention_refuses_more_batch_heads_than_grid_allows(device):
    q = torch.empty(65536, 1, 1, 16, device=device).expand(65536, 1, 1, 16)
    with pytest.raises(ValueError, match="at most 65535 there; one program column per"):
        attention(q, q, q)
