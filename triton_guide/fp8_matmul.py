"""FP8 matrix multiplication: e4m3 inputs with per-tensor or per-row/column scales.

An FP8 number (``torch.float8_e4m3fn``: 1 sign bit, 4 exponent bits, 3 mantissa bits, no
infinity) spans only ``±448``, so a matrix is stored as FP8 values ``x_fp8`` and a float32
scale, with ``x ≈ x_fp8 * scale`` (:func:`quantize_fp8`). The product of two such matrices is

    c = (a_fp8 @ b_fp8) * scale_a * scale_b

where ``scale_a`` is one number or one per row of ``a``, and ``scale_b`` one number or one per
column of ``b``: each factor is constant along K, so it comes out of the sum over K.
:func:`fp8_matmul` computes this with a Triton kernel: ``tl.dot`` of FP8 tiles into a
float32 accumulator, the scales applied once to the finished tile.

This is an importable module, not a registered op of the package: the registry's ops take
float32 example inputs, record gradients and compile whole under ``torch.compile``, and an
FP8 product with its scales has none of that (nothing differentiates through a cast to FP8).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .hardware import multiprocessors
from .launch import cdiv
from .matmul import store_output_tile, tile_of_program
from .matrix_layout import stored_by_columns
from .runtime import interpreting
from .validation import check_bool, check_tensor, needs_int64_offsets

FP8 = torch.float8_e4m3fn
# e4m3's largest finite value: 1.75 * 2**8 (exponent field 1111, mantissa 110; 1111 111 is NaN).
E4M3_MAX = torch.finfo(FP8).max  # 448.0
# What quantize_fp8 takes, and what fp8_matmul writes.
SOURCE_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
OUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
QUANTIZE_PER = ("tensor", "row", "column")


def quantize_fp8(x: torch.Tensor, per: str = "tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` as e4m3 values and float32 scales, ``x ≈ x_fp8 * scale``.

    ``per="tensor"``: one scale, shape ``()``. ``per="row"`` (2D x): one per row, shape
    ``(rows, 1)``, for the left operand of :func:`fp8_matmul`. ``per="column"`` (2D x): one per
    column, shape ``(1, columns)``, for the right operand; its values come back stored column
    by column (a transposed view), the order the kernel reads.

    Each scale is ``amax / 448`` over its group, so the group's largest magnitude lands on
    e4m3's largest value and the rest keep as many of its 3 mantissa bits as the exponent
    range allows (a group of zeros gets scale 1). The scaled values are clamped to ``±448``
    before the cast, so that the cast never sees a value past e4m3's range: what it does
    with one depends on the PyTorch build. In c10's ``fp8e4m3fn_from_fp32_value`` as PyTorch's
    source has long had it, magnitudes up to 464 (halfway to the next binade's 480) round to
    448 and anything larger, infinity included, becomes NaN (e4m3fn has no infinity); torch
    2.13's CPU cast saturates instead (470, 1000 and inf all gave 448 when checked). A value
    divided by its own group's amax passes 448 only by a rounding of the division, but the
    clamp makes every build give the same bits.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in SOURCE_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in SOURCE_DTYPES)
        raise TypeError(f"x has dtype {x.dtype}; quantize_fp8 takes one of: {names}")
    if per not in QUANTIZE_PER:
        raise ValueError(f"per must be one of {QUANTIZE_PER}, got {per!r}")
    if per != "tensor" and x.dim() != 2:
        raise ValueError(f"per={per!r} needs a 2D x, got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise ValueError(f"x is empty (shape {tuple(x.shape)}); nothing to quantize")
    if per == "column":
        x_fp8, scale = quantize_fp8(x.t().contiguous(), per="row")
        return x_fp8.t(), scale.t()
    x = x.float()
    if per == "tensor":
        amax = x.abs().amax()
    else:
        amax = x.abs().amax(dim=1, keepdim=True)
    if not torch.isfinite(amax).all():
        raise ValueError("x holds inf or NaN, which no finite scale can represent")
    # A group of zeros: any scale gives zeros; 1 keeps the division finite.
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    x_fp8 = (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
    return x_fp8, scale


def dequantize_fp8(x_fp8: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The values ``x_fp8`` stands for, in float64: ``x_fp8 * scale``."""
    return x_fp8.double() * scale.double()


def fp8_matmul_reference(a_fp8: torch.Tensor, b_fp8: torch.Tensor, scale_a: torch.Tensor,
                         scale_b: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16
                         ) -> torch.Tensor:
    """What :func:`fp8_matmul` computes, in float64 from the dequantized inputs (returned in
    float64 whatever ``out_dtype``, which only the kernel rounds to)."""
    return dequantize_fp8(a_fp8, scale_a) @ dequantize_fp8(b_fp8, scale_b)


def _config(m: int, n: int, k: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k,
                          "GROUP_SIZE_M": 8}, num_stages=stages, num_warps=warps)


# Under the interpreter, one tile (each tl.dot is a numpy product there: nothing to tune).
# The tests size their problems from it (a tile plus one in each direction).
INTERPRETER_TILE = (32, 32, 32)


# The tile for products too small to fill the GPU with large tiles (not tuned there).
SMALL_TILE = (64, 128, 128, 4, 4)


def fp8_configs() -> list[triton.Config]:
    """The tiles the autotuner tries. FP8 tiles take half the shared memory of 16-bit ones,
    so K steps of 128 fit several stages; wgmma multiplies FP8 32 values of K at a time."""
    if interpreting():
        return [_config(*INTERPRETER_TILE, 1, 4)]
    return [_config(128, 256, 128, 3, 8), _config(256, 128, 128, 3, 8),
            _config(128, 128, 128, 4, 8), _config(128, 128, 128, 4, 4), _config(*SMALL_TILE)]


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Large tiles only for products with at least four 128 x 128 tiles per SM; smaller ones
    get the one small tile, untimed (each new shape would otherwise compile and time five)."""
    if len(configs) == 1:
        return configs
    M, N = named_args["M"], named_args["N"]
    if cdiv(M, 128) * cdiv(N, 128) >= 4 * multiprocessors(named_args["a_ptr"].device):
        return configs
    return [c for c in configs if (c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_N"],
                                   c.num_warps) == (SMALL_TILE[0], SMALL_TILE[1], SMALL_TILE[4])]


@triton.autotune(configs=fp8_configs(),
                 key=["M", "N", "K", "SCALE_A_ROWS", "SCALE_B_COLUMNS", "FAST_ACCUMULATION"],
                 prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def fp8_matmul_kernel(
    a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr,
    M, N, K,  # a is M x K (stored by rows), b is K x N (stored by columns), c is M x N
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    stride_sa,  # elements between the scales of neighbouring rows of a
    stride_sb,  # ... of neighbouring columns of b
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    SCALE_A_ROWS: tl.constexpr,  # scale_a holds one scale per row of a (else one in all)
    SCALE_B_COLUMNS: tl.constexpr,  # scale_b holds one per column of b (else one in all)
    FAST_ACCUMULATION: tl.constexpr = False,  # leave the sum to the tensor cores (below)
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
):
    pid_m, pid_n = tile_of_program(tl.program_id(axis=0), M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                   GROUP_SIZE_M)
    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    if INT64_OFFSETS:
        offs_m = offs_m.to(tl.int64)
        offs_n = offs_n.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
    # Rows of a and columns of b past the edge wrap round instead of being masked: the loads
    # stay in bounds and the extra results are never stored; only K needs a mask.
    rows = offs_m % M
    cols = offs_n % N
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn

    # The FP8 products are summed into a float32 accumulator: each is exact there (two
    # 4-bit significands make at most 8 bits). On sm_90 the tensor cores' own FP8
    # accumulation keeps fewer bits than float32, and Triton's default for an FP8 tl.dot
    # (max_num_imprecise_acc 2**30) never moves the sum out of it: FAST_ACCUMULATION, as
    # torch._scaled_mm(..., use_fast_accum=True). Otherwise each tile step's products
    # (BLOCK_SIZE_K of them) are summed by the tensor cores and that partial sum is added to
    # the float32 accumulator, as _scaled_mm does by default. The interpreter sums in float32.
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        if FAST_ACCUMULATION:
            accumulator = tl.dot(a, b, accumulator)
        else:
            accumulator = tl.dot(a, b, accumulator, max_num_imprecise_acc=BLOCK_SIZE_K)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    # The scales, once per tile: every term of a row's (column's) sum carries the same
    # scale, so it factors out of the sum over K. Applied inside the loop it would cost a
    # multiply of the whole tile per K step, and the tensor cores would have to take the
    # scaled (no longer FP8) values.
    if SCALE_A_ROWS:
        scale_a = tl.load(scale_a_ptr + rows * stride_sa)
        accumulator = accumulator * scale_a[:, None]
    else:
        accumulator = accumulator * tl.load(scale_a_ptr)
    if SCALE_B_COLUMNS:
        scale_b = tl.load(scale_b_ptr + cols * stride_sb)
        accumulator = accumulator * scale_b[None, :]
    else:
        accumulator = accumulator * tl.load(scale_b_ptr)

    store_output_tile(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, 1, INT64_OFFSETS)


def _check_fp8(name: str, x: object) -> torch.Tensor:
    if isinstance(x, torch.Tensor) and x.dtype != FP8:
        raise TypeError(
            f"{name} has dtype {x.dtype}; fp8_matmul takes float8_e4m3fn only (quantize it "
            f"with quantize_fp8; e5m2 and other dtypes are not supported)"
        )
    return check_tensor(name, x, dtypes=(FP8,), ndim=2)


def _check_scale(name: str, scale: object, shapes: dict[tuple, bool],
                 what: str) -> tuple[torch.Tensor, bool]:
    """Check one scale tensor; return it and whether it holds one scale per row (column)."""
    scale = check_tensor(name, scale, dtypes=(torch.float32,))
    if tuple(scale.shape) not in shapes:
        raise ValueError(
            f"{name} has shape {tuple(scale.shape)}; expected one scale for the whole matrix "
            f"(shape () or (1,)) or {what}"
        )
    # Reading the values of a GPU tensor makes the host wait for the GPU, on every call (and
    # a CUDA graph being captured forbids it): there, as for torch._scaled_mm, the scales
    # are the caller's to get right (quantize_fp8 makes finite positive ones). Tensors on
    # the CPU (the interpreter) are checked.
    if not scale.is_cuda and not bool((torch.isfinite(scale) & (scale > 0)).all()):
        raise ValueError(f"{name} must hold finite positive scales, got {scale.flatten()[:8]}")
    return scale, shapes[tuple(scale.shape)]


def fp8_matmul(a_fp8: torch.Tensor, b_fp8: torch.Tensor, scale_a: torch.Tensor,
               scale_b: torch.Tensor, out_dtype: torch.dtype = torch.bfloat16,
               fast_accumulation: bool = False) -> torch.Tensor:
    """``(a_fp8 @ b_fp8) * scale_a * scale_b`` in ``out_dtype``, summed in float32.

    ``a_fp8`` (M x K) and ``b_fp8`` (K x N) are ``torch.float8_e4m3fn``; ``scale_a`` is float32
    of shape ``()`` or ``(1,)`` (one scale) or ``(M, 1)`` (one per row of a); ``scale_b`` of
    shape ``()``, ``(1,)`` or ``(1, N)`` (one per column of b), as :func:`quantize_fp8` makes
    them. ``out_dtype``: float32, bfloat16 or float16. ``fast_accumulation``: on sm_90, leave
    the whole sum over K to the tensor cores' FP8 accumulation, which keeps fewer bits than
    float32 (``torch._scaled_mm``'s ``use_fast_accum``); by default each tile step's partial
    sum is added in float32.

    On Hopper, wgmma takes FP8 operands in one order only, K-major: a stored by rows and b by
    columns (as for TF32, see ``matrix_layout.k_major``); ``torch._scaled_mm`` also requires b
    by columns. Any other layout is copied to that one here rather than refused: b stored
    by rows is how ``x @ w`` is usually written, and the copy reads and writes K * N bytes,
    one per value (at an H100's ~3 TB/s, about 0.01 ms for 4096 x 4096, against about
    0.14 ms for a 4096^3 FP8 product at ~1000 TFLOP/s: estimates, which
    benchmarks/gpu_check_fp8.py measures). Read by rows, b's tiles are transposed in the
    inner loop instead: compiled for sm_90 by triton 3.9 (128 x 128 x 128 tiles, 4 warps),
    146 st.shared and 96 byte permutes (prmt) in the PTX against 18 and 0, and 16 bytes of
    spills. ``quantize_fp8(b, per="column")`` returns b by columns, so a caller that
    quantizes once pays nothing.
    """
    a_fp8 = _check_fp8("a_fp8", a_fp8)
    b_fp8 = _check_fp8("b_fp8", b_fp8)
    (M, K), (K_b, N) = a_fp8.shape, b_fp8.shape
    if K != K_b:
        raise ValueError(f"a_fp8 is {tuple(a_fp8.shape)} and b_fp8 is {tuple(b_fp8.shape)}: "
                         f"a_fp8's columns ({K}) must equal b_fp8's rows ({K_b})")
    one = {(): False, (1,): False, (1, 1): M == 1}
    scale_a, scale_a_rows = _check_scale("scale_a", scale_a, {**one, (M, 1): True},
                                         f"one per row of a_fp8 (shape ({M}, 1))")
    one = {(): False, (1,): False, (1, 1): N == 1}
    scale_b, scale_b_columns = _check_scale("scale_b", scale_b, {**one, (1, N): True},
                                            f"one per column of b_fp8 (shape (1, {N}))")
    if out_dtype not in OUT_DTYPES:
        names = ", ".join(str(d).removeprefix("torch.") for d in OUT_DTYPES)
        raise TypeError(f"out_dtype is {out_dtype}; expected one of: {names}")
    fast_accumulation = check_bool("fast_accumulation", fast_accumulation)
    if stored_by_columns(a_fp8) or a_fp8.stride(1) != 1:
        a_fp8 = a_fp8.contiguous()
    if not (stored_by_columns(b_fp8) or (N == 1 and b_fp8.stride(0) == 1)):
        b_fp8 = b_fp8.t().contiguous().t()
    c = torch.empty((M, N), dtype=out_dtype, device=a_fp8.device)
    int64 = needs_int64_offsets(a_fp8, b_fp8, c)

    def grid(meta):
        return (cdiv(M, meta["BLOCK_SIZE_M"]) * cdiv(N, meta["BLOCK_SIZE_N"]),)

    fp8_matmul_kernel[grid](
        a_fp8, b_fp8, c, scale_a, scale_b, M, N, K,
        a_fp8.stride(0), a_fp8.stride(1), b_fp8.stride(0), b_fp8.stride(1),
        c.stride(0), c.stride(1),
        scale_a.stride(0) if scale_a_rows else 0, scale_b.stride(1) if scale_b_columns else 0,
        SCALE_A_ROWS=scale_a_rows, SCALE_B_COLUMNS=scale_b_columns,
        FAST_ACCUMULATION=fast_accumulation, INT64_OFFSETS=int64,
    )
    return c
