"""How the main attention kernels tile their work: the autotuner's block sizes, which
blocks of keys (or queries) a block of queries (or keys) must visit and which of them need
a mask, and the tensor descriptors the kernels read q, k, v and grad_out through.

Used by :mod:`triton_guide.attention`; nothing here launches a kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .hardware import TMA_ALIGNMENT
from .launch import cdiv, unchecked_descriptor
from .runtime import interpreting
from .validation import INT32_MAX


def _set_block_shapes(nargs):
    """Before each launch: make the descriptors' tiles match the configuration's blocks
    (queries and their gradients in BLOCK_M rows, keys and values in BLOCK_N)."""
    for name, rows in (("q_desc", "BLOCK_M"), ("do_desc", "BLOCK_M"),
                       ("k_desc", "BLOCK_N"), ("v_desc", "BLOCK_N")):
        if name in nargs:
            nargs[name].block_shape = [1, 1, nargs[rows], nargs["BLOCK_D"]]


def _config(block_m: int, block_n: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n}, num_stages=stages,
                         num_warps=warps, pre_hook=_set_block_shapes)


# (BLOCK_M, BLOCK_N, num_stages, num_warps) that the autotuner tries, for head_dim up to 64,
# up to 128 and up to 256. Up to 128: the four fastest of 8-10 candidates per kernel, each
# timed on its own on an H100 over the attention page's shapes. The forward and dq kernels
# need BLOCK_M to be a multiple of BLOCK_N, dkdv the reverse. Above 128 the tiles are twice
# as wide: these are smaller blocks that fit an H100's 227 KiB of shared memory, not tuned
# (a configuration that does not fit is skipped by the autotuner). Float32 tiles take
# twice the shared memory of float16 ones: float32 gets smaller configurations instead.
TUNED = {
    "forward": {64: [(128, 128, 3, 4), (128, 64, 3, 4), (128, 64, 4, 4), (64, 64, 3, 4)],
                128: [(128, 64, 2, 4), (128, 128, 3, 8), (256, 64, 3, 8), (64, 64, 3, 4)],
                256: [(128, 32, 2, 8), (64, 64, 2, 8), (64, 32, 2, 4)]},
    "dkdv": {64: [(32, 64, 3, 4), (64, 64, 3, 4), (64, 64, 4, 4), (32, 128, 5, 4)],
             128: [(64, 128, 3, 8), (64, 128, 4, 8), (64, 128, 5, 8), (32, 64, 3, 4)],
             256: [(32, 64, 2, 8), (16, 64, 2, 4), (16, 32, 2, 4)]},
    "dq": {64: [(128, 64, 4, 8), (128, 64, 3, 8), (64, 64, 2, 4), (64, 64, 3, 4)],
           128: [(128, 64, 3, 8), (128, 64, 4, 8), (128, 64, 5, 8), (128, 128, 2, 8)],
           256: [(64, 32, 2, 8), (64, 16, 2, 4), (32, 32, 2, 4)]},
}
FLOAT32 = {"forward": {128: [(64, 32, 2, 4)], 256: [(32, 32, 2, 4), (32, 16, 2, 4)]},
           "dkdv": {128: [(32, 64, 2, 4)], 256: [(16, 32, 2, 4), (16, 16, 2, 4)]},
           "dq": {128: [(64, 32, 2, 4)], 256: [(32, 16, 2, 4), (16, 16, 2, 4)]}}
INTERPRETER_BLOCKS = {"forward": (32, 16), "dkdv": (16, 32), "dq": (32, 16)}  # small, quick
MAX_BLOCK = max(max(c[:2]) for table in TUNED.values() for cs in table.values() for c in cs)
AUTOTUNE_KEY = ["num_queries", "num_keys", "HEAD_DIM", "CAUSAL", "WINDOW", "DOT_PRECISION"]


def _width(block_d: int) -> int:
    """The row of TUNED for a tile of ``block_d`` columns."""
    return 64 if block_d <= 64 else 128 if block_d <= 128 else 256


def autotune(kernel: str):
    """``triton.autotune`` over the kernel's tuned configurations for the call's head_dim
    (or the ones for float32)."""
    if interpreting():
        return triton.autotune([_config(*INTERPRETER_BLOCKS[kernel], 1, 4)], key=AUTOTUNE_KEY)
    by_width = {width: [_config(*c) for c in cs] for width, cs in TUNED[kernel].items()}
    float32 = {width: [_config(*c) for c in cs] for width, cs in FLOAT32[kernel].items()}

    def for_head_dim(configs, named_args, **kwargs):
        width = _width(kwargs["BLOCK_D"])
        if named_args["q_desc"].base.dtype == torch.float32:
            return float32[max(width, 128)]
        return by_width[width]

    every = [c for cs in by_width.values() for c in cs] + [c for cs in float32.values() for c in cs]
    return triton.autotune(every, key=AUTOTUNE_KEY,
                           prune_configs_by={"early_config_prune": for_head_dim})



@triton.jit
def key_ranges(first_row, num_keys, diagonal, window, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """The keys that query rows ``first_row .. first_row + BLOCK_M`` see, as block starts
    ``lo <= full_lo <= full_hi <= hi``: some row sees keys in ``[lo, hi)``, every row sees
    every key of the blocks in ``[full_lo, full_hi)`` (no mask needed there)."""
    last_row = first_row + BLOCK_M - 1
    lo = 0
    hi = num_keys
    full_lo = 0
    full_hi = (num_keys // BLOCK_N) * BLOCK_N  # a last partial block needs the bounds mask
    if CAUSAL:
        hi = tl.minimum(hi, tl.maximum(last_row + diagonal + 1, 0))
        full_hi = tl.minimum(full_hi, (tl.maximum(first_row + diagonal + 1, 0) // BLOCK_N) * BLOCK_N)
    if WINDOW:
        lo = (tl.maximum(first_row + diagonal - window + 1, 0) // BLOCK_N) * BLOCK_N
        full_lo = tl.cdiv(tl.maximum(last_row + diagonal - window + 1, 0), BLOCK_N) * BLOCK_N
    hi = tl.maximum(hi, lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi



@triton.jit
def query_ranges(first_key, num_queries, diagonal, window, BLOCK_N: tl.constexpr,
                  BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr):
    """The queries that see keys ``first_key .. first_key + BLOCK_N``, as block starts
    ``lo <= full_lo <= full_hi <= hi`` (as :func:`key_ranges`, from the keys' side)."""
    last_key = first_key + BLOCK_N - 1
    lo = 0
    hi = num_queries
    full_lo = 0
    full_hi = num_queries  # rows past num_queries load as zeros and add nothing
    if CAUSAL:
        lo = (tl.maximum(first_key - diagonal, 0) // BLOCK_M) * BLOCK_M
        full_lo = tl.cdiv(tl.maximum(last_key - diagonal, 0), BLOCK_M) * BLOCK_M
    if WINDOW:
        hi = tl.minimum(hi, tl.maximum(last_key - diagonal + window, 0))
        full_hi = (tl.maximum(first_key - diagonal + window, 0) // BLOCK_M) * BLOCK_M
    hi = tl.maximum(hi, lo)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi



# q, k, v (and, in the backward, the output's gradient) are read through tensor
# descriptors (``triton.tools.tensor_descriptor``): a host-side record of a tensor's base,
# shape and strides that lets ``desc.load`` fetch a whole tile. On Hopper (sm_90) that load
# is one TMA instruction, an asynchronous copy engine that fills shared memory without
# using the warps' registers or address arithmetic, and rows past the end of a head come
# back as zeros. Elsewhere Triton lowers it to ordinary loads. TMA needs the base and
# every stride but the last to be multiples of 16 bytes (TMA_ALIGNMENT).


def _descriptor_ready(t: torch.Tensor) -> bool:
    """True when a (batch, heads, seq, head_dim) tensor meets TMA's alignment rules."""
    nbytes = t.element_size()
    return (t.stride(3) == 1 and t.data_ptr() % TMA_ALIGNMENT == 0
            and all(t.stride(i) > 0 and t.stride(i) * nbytes % TMA_ALIGNMENT == 0
                    for i in range(3) if t.shape[i] > 1))


# Per layout (shape, strides, dtype): the descriptor's shape and strides, worked out once.
# Every call of attention makes three descriptors, and the host's time decides small calls.
_descriptor_layouts: dict[tuple, tuple[list[int], list[int]]] = {}


def tma_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when a descriptor can read it, else a copy that can: contiguous, with
    ``head_dim`` padded by zeros to a multiple of 16 bytes (zero columns add nothing to
    ``q @ k^T``, and the extra output columns they give ``p @ v`` are never stored)."""
    if _descriptor_ready(t):
        return t
    head_dim = t.shape[-1]
    per_row = TMA_ALIGNMENT // t.element_size()
    padded = torch.zeros((*t.shape[:-1], cdiv(head_dim, per_row) * per_row),
                         dtype=t.dtype, device=t.device)
    padded[..., :head_dim] = t
    return padded


def descriptor(t: torch.Tensor, block_rows: int, block_d: int) -> TensorDescriptor:
    """A descriptor over (batch, heads, seq, head_dim) that loads [1, 1, block_rows, block_d]."""
    key = (t.shape, t.stride(), t.dtype)
    layout = _descriptor_layouts.get(key)
    if layout is None:
        # A dimension of size 1 is never stepped along: any aligned stride describes it.
        strides = [stride if size > 1 else TMA_ALIGNMENT // t.element_size()
                   for size, stride in zip(t.shape, t.stride())]
        strides[-1] = 1
        if len(_descriptor_layouts) >= 1024:
            _descriptor_layouts.clear()
        layout = _descriptor_layouts[key] = (list(t.shape), strides)
    # tma_layout has made t readable by TMA: skip the constructor's re-check of it.
    return unchecked_descriptor(t, *layout, [1, 1, block_rows, block_d])


def needs_int64_rows(num_rows: int, head_dim: int) -> bool:
    """Whether ``row * head_dim`` within one head can pass int32 (the kernels' stores index
    rows up to a block, at most MAX_BLOCK rows, past the last)."""
    return (num_rows + MAX_BLOCK) * head_dim > INT32_MAX
