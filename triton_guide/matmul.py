"""Matrix multiplication ``a @ b``: tiles, ``tl.dot``, a loop over K, grouped program order.

Each program computes one ``BLOCK_SIZE_M x BLOCK_SIZE_N`` tile of the output, walking along
K one ``BLOCK_SIZE_K`` slice at a time and accumulating in float32. Programs are numbered so
that ``GROUP_SIZE_M`` consecutive ones share columns of ``b`` (and rows of ``a``) while those
are still in the L2 cache. Tile sizes are chosen per problem shape by ``triton.autotune``,
except where the largest tiles would leave a nearly empty last wave of programs: those rows
are computed in smaller tiles by a second launch (:func:`last_wave_split`, on Hopper GPUs).

Two kernels do this: :func:`matmul_kernel` loads its tiles through pointers;
:func:`matmul_tma_kernel` through tensor descriptors (on Hopper, TMA copies of whole tiles).
:func:`kernel_inputs` chooses: descriptors wherever the GPU has TMA, except for small
products whose rows a descriptor cannot read as they are.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from .hardware import compute_capability, has_tma, multiprocessors, shared_memory_per_block
from .launch import cdiv, fast_launch, next_power_of_2
from .library import Operator
from .matrix_layout import (aligned_copies, alignment, descriptor, descriptor_ready, k_major,
                            layout, padded_length, row_aligned, stored_by_columns,
                            unaligned_runs)
from .precision import dot_input_precision
from .registry import register
from .runtime import interpreting
from .validation import check_same_dtype, check_tensor, needs_int64_offsets


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What :func:`matmul` computes, in plain PyTorch."""
    return a @ b


def _set_tile_shapes(nargs):
    """Before each launch of :func:`matmul_tma_kernel`: make the descriptors' tiles match the
    configuration's blocks (a descriptor over a matrix stored by columns reads it transposed)."""
    m, n, k = (nargs[f"BLOCK_SIZE_{axis}"] for axis in "MNK")
    nargs["a_desc"].block_shape = [k, m] if nargs.get("A_COLUMNS") else [m, k]
    nargs["b_desc"].block_shape = [n, k] if nargs.get("B_COLUMNS") else [k, n]


def _config(m: int, n: int, k: int, group: int, stages: int, warps: int,
            pre_hook=None) -> triton.Config:
    meta = {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": group}
    return triton.Config(meta, num_stages=stages, num_warps=warps, pre_hook=pre_hook)


# Tiles of at least this many outputs are "large": they suit products with enough of them
# to keep every SM busy several times over (the H100's tuning picked them only there).
LARGE_TILE = 128 * 128


# float32 only (pruned for 16-bit inputs): three stages leave room for tf32x3's extra parts.
FLOAT32_ONLY_TILE = (128, 128, 32, 8, 3, 4)


def _tile_of(c: triton.Config) -> tuple[int, ...]:  # the tuple _config made c from
    return (*(c.kwargs[f"BLOCK_SIZE_{axis}"] for axis in "MNK"), c.kwargs["GROUP_SIZE_M"],
            c.num_stages, c.num_warps)


def matmul_configs(pre_hook=None) -> list[triton.Config]:
    """The tile shapes the autotuner tries: several on a GPU, one under the interpreter;
    each with ``pre_hook`` (the descriptor kernel's, which sets the tile shapes)."""
    if interpreting():
        # The interpreter runs one numpy matmul per tile; there is nothing to tune.
        return [_config(32, 32, 32, 4, 1, 4, pre_hook)]
    configs = [
        # large tiles, for products of thousands of rows and columns
        (128, 256, 64, 8, 3, 8),
        (256, 128, 64, 8, 3, 8),
        (128, 128, 64, 8, 4, 8),
        (128, 128, 64, 8, 4, 4),
        (128, 128, 64, 8, 5, 4),
        (128, 128, 32, 8, 4, 4),  # fits shared memory with float32 inputs too
        FLOAT32_ONLY_TILE,
        # smaller tiles with a longer K step, for products too small to fill the GPU with
        # large tiles (512^3, 1024^3, few rows); 16-row tiles for decoding a few tokens
        (64, 128, 128, 8, 3, 4),
        (64, 64, 128, 8, 3, 4),
        (64, 64, 64, 8, 4, 4),
        (32, 128, 128, 8, 4, 4),
        (64, 32, 128, 8, 4, 4),
        (16, 64, 256, 1, 3, 4),
        (16, 128, 128, 1, 4, 4),
        # narrow tiles as tall as the product, so a few rows still make ~128 programs that
        # each read their own columns of b once: 128-256 rows, and 1-16 (decoding)
        (128, 32, 128, 8, 4, 4),
        (128, 64, 128, 8, 3, 4),
        (16, 32, 256, 1, 4, 4),
    ]
    return [_config(*config, pre_hook=pre_hook) for config in configs]


def prune_configs(configs: list[triton.Config], named_args: dict, **kwargs) -> list[triton.Config]:
    """Before autotuning a new shape, drop the configurations that cannot win there.

    Stages that overflow shared memory cannot run (float32 takes twice float16's space);
    a tile taller than M (wider than N) rounded to a power of two computes padding; small
    tiles lose once large ones give every SM several tiles; few rows get the height of
    :func:`few_rows_tile_height`. The first call of a shape compiles and times only these.
    """
    M, N = named_args["M"], named_args["N"]
    a = named_args["a_desc"].base if "a_desc" in named_args else named_args["a_ptr"]
    item_size = a.element_size()
    if item_size != 4:
        configs = [c for c in configs if _tile_of(c) != FLOAT32_ONLY_TILE]

    def staged_bytes(c):  # num_stages copies of an a tile and a b tile
        m, n, k = (c.kwargs[f"BLOCK_SIZE_{axis}"] for axis in "MNK")
        return c.num_stages * (m * k + k * n) * item_size

    runnable = [c for c in configs
                if staged_bytes(c) <= shared_memory_per_block(a.device)] or configs
    fitting = [c for c in runnable
               if c.kwargs["BLOCK_SIZE_M"] <= max(16, next_power_of_2(M))
               and c.kwargs["BLOCK_SIZE_N"] <= max(32, next_power_of_2(N))]
    large = [c for c in fitting
             if c.kwargs["BLOCK_SIZE_M"] * c.kwargs["BLOCK_SIZE_N"] >= LARGE_TILE]
    if large and cdiv(M, 128) * cdiv(N, 128) >= 4 * multiprocessors(a.device):
        return large
    tall = [c for c in fitting if c.kwargs["BLOCK_SIZE_M"] == few_rows_tile_height(M)]
    return tall or fitting or runnable


def few_rows_tile_height(M: int) -> int:
    """The tile height for a product of 33-256 rows (0, no rule, for any other M).

    With so few rows the autotuner's own timing (each call alone, after emptying L2) picks
    tiles that run 17-29% (64-128 rows: 32 x 128 tiles, which read each column of b several
    times) and 2-16% (192-256 rows) slower, timed back to back on fresh inputs as a network
    calls them, than tiles as tall as the product (65-128 rows) or 64 rows tall (H100,
    float16 and bfloat16, the pointer kernel; the descriptor kernel takes the same rule).
    """
    if 64 < M <= 128:
        return 128
    if 32 < M <= 256:
        return 64
    return 0


@triton.jit
def tile_of_program(
    program_id, M, N,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,  # tile rows per group; 1 gives plain row-major order
):
    """The tile of C (tile row ``pid_m``, tile column ``pid_n``) that program
    ``program_id`` computes, in grouped order."""
    # Walk down GROUP_SIZE_M tile rows before moving one tile column right, so programs
    # that run at the same time share tiles of a and b while they are still in L2.
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = program_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    # The last group may have fewer tile rows than GROUP_SIZE_M.
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((program_id % num_pid_in_group) % group_size_m)
    pid_n = (program_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def tile_pointers(
    x_ptr, offs_rows, offs_cols, stride_row, stride_col,
    ALIGN: tl.constexpr,  # alignment the launcher proved (see matmul_kernel's A_ALIGN)
    COLUMNS: tl.constexpr,  # x is stored column by column, not row by row
):
    """Pointers to the elements of x at ``offs_rows`` x ``offs_cols``, with the alignment
    the launcher proved stated for the compiler.

    Triton cannot see it when a size is not a multiple of 16 (1000, say): every row of x
    (every column, with COLUMNS) starts on an ALIGN-element boundary, and the offsets
    along a row come in aligned runs of ALIGN (the row length is a multiple of it, so a
    wrap with % never splits a run). With that, loads move 16 bytes at a time.
    """
    if COLUMNS:
        offs_rows = tl.max_contiguous(tl.multiple_of(offs_rows, ALIGN), ALIGN)
        cols = tl.multiple_of(offs_cols * stride_col, ALIGN)
        return x_ptr + offs_rows[:, None] * stride_row + cols[None, :]
    else:
        offs_cols = tl.max_contiguous(tl.multiple_of(offs_cols, ALIGN), ALIGN)
        rows = tl.multiple_of(offs_rows * stride_row, ALIGN)
        return x_ptr + rows[:, None] + offs_cols[None, :] * stride_col


# The layout is in the key: each layout compiles to its own kernel, tuned on its own.
@triton.autotune(configs=matmul_configs(),
                 key=["M", "N", "K", "A_COLUMNS", "B_COLUMNS", "A_ALIGN", "B_ALIGN",
                      "INPUT_PRECISION"],
                 prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,  # a is M x K, b is K x N, c is M x N
    stride_am, stride_ak,  # elements between neighbours of a along M and along K
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,  # tile rows per group in the program order
    A_ALIGN: tl.constexpr = 1,  # a's rows start a multiple of this many elements apart,
    # and K is a multiple of it too (with A_COLUMNS: a's columns, and M)
    B_ALIGN: tl.constexpr = 1,  # the same for b's rows, with N (with B_COLUMNS: columns, K)
    C_ALIGN: tl.constexpr = 1,  # the same for c's rows, with N a multiple of it
    A_COLUMNS: tl.constexpr = False,  # a is stored column by column (a transposed view)
    B_COLUMNS: tl.constexpr = False,  # the same for b
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1: compute them in int64
    INPUT_PRECISION: tl.constexpr = "tf32",  # tl.dot's for float32 (triton_guide.precision)
):
    # The launcher proved the length of a's rows (K) a multiple of A_ALIGN, and so on:
    # see A_ALIGN, B_ALIGN and C_ALIGN. Written like this, the compiler can see it too
    # (tl.multiple_of marks tensors, not scalars), so the masks against K and N and the
    # wraps round M and N below come in runs of that many elements, and loads and stores
    # stay 16 bytes wide.
    if A_COLUMNS:
        M = (M // A_ALIGN) * A_ALIGN
    else:
        K = (K // A_ALIGN) * A_ALIGN
    if B_COLUMNS:
        K = (K // B_ALIGN) * B_ALIGN
    N = (N // C_ALIGN) * C_ALIGN
    program_id = tl.program_id(axis=0)
    pid_m, pid_n = tile_of_program(
        program_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M
    )

    # Rows of a and columns of b past the edge wrap round (% M, % N) instead of being masked:
    # the loads stay in bounds, the extra results are never stored, and the loop needs a
    # mask along K only.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    # Step along K by this many elements of a and of b per iteration.
    step_ak = BLOCK_SIZE_K * stride_ak
    step_bk = BLOCK_SIZE_K * stride_bk
    if INT64_OFFSETS:
        offs_am = offs_am.to(tl.int64)
        offs_bn = offs_bn.to(tl.int64)
        offs_k = offs_k.to(tl.int64)
        step_ak = tl.cast(BLOCK_SIZE_K, tl.int64) * stride_ak
        step_bk = tl.cast(BLOCK_SIZE_K, tl.int64) * stride_bk
    a_ptrs = tile_pointers(a_ptr, offs_am, offs_k, stride_am, stride_ak, A_ALIGN, A_COLUMNS)
    b_ptrs = tile_pointers(b_ptr, offs_k, offs_bn, stride_bk, stride_bn, B_ALIGN, B_COLUMNS)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        # Past the end of K (in the last slice only), zeros: they add nothing to the sum.
        k_remaining = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
        a_ptrs += step_ak
        b_ptrs += step_bk
    store_output_tile(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, INT64_OFFSETS)


@triton.jit
def store_output_tile(
    c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    C_ALIGN: tl.constexpr, INT64_OFFSETS: tl.constexpr,
):
    """Write tile ``(pid_m, pid_n)`` of c in c's dtype, leaving out the part past the edges
    (c's rows start a multiple of ``C_ALIGN`` elements apart, and N is a multiple of it)."""
    # As in matmul_kernel: the same N, now visibly a multiple of C_ALIGN, so the mask comes
    # in runs of C_ALIGN and the stores stay 16 bytes wide (without it, matmul_tma_kernel ran
    # 2000 x 3000 x 1024 with b by columns at 204 TFLOP/s on the H100, with it at 437).
    N = (N // C_ALIGN) * C_ALIGN
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    if INT64_OFFSETS:
        offs_cm = offs_cm.to(tl.int64)
        offs_cn = offs_cn.to(tl.int64)
    c_rows = tl.multiple_of(offs_cm * stride_cm, C_ALIGN)
    offs_cn = tl.max_contiguous(tl.multiple_of(offs_cn, C_ALIGN), C_ALIGN)
    c_ptrs = c_ptr + c_rows[:, None] + offs_cn[None, :] * stride_cn
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


@triton.jit
def descriptor_tile(desc, row, col, COLUMNS: tl.constexpr):
    """The tile of x whose top-left element is ``(row, col)``, through the descriptor
    ``desc``: over x itself, or with COLUMNS (x stored column by column) over ``x.t()``,
    whose tile comes back transposed."""
    # One return: Triton 3.6 type-checks both returns of an `if` on a constexpr.
    if COLUMNS:
        tile = desc.load([col, row]).T
    else:
        tile = desc.load([row, col])
    return tile


@triton.autotune(configs=matmul_configs(pre_hook=_set_tile_shapes),
                 key=["M", "N", "K", "A_COLUMNS", "B_COLUMNS", "INPUT_PRECISION"],
                 prune_configs_by={"early_config_prune": prune_configs})
@triton.jit
def matmul_tma_kernel(
    a_desc, b_desc,  # tensor descriptors over a and b (over a.t() with A_COLUMNS, b.t() ...)
    c_ptr,
    M, N, K,
    stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    C_ALIGN: tl.constexpr = 1,  # as in matmul_kernel
    A_COLUMNS: tl.constexpr = False,  # a is stored column by column (a transposed view)
    B_COLUMNS: tl.constexpr = False,  # the same for b
    INT64_OFFSETS: tl.constexpr = False,  # offsets can pass 2**31 - 1 (only c's are computed)
    INPUT_PRECISION: tl.constexpr = "tf32",  # as in matmul_kernel
):
    # matmul_kernel with its tiles read through descriptors: the TMA copy engine fetches
    # whole tiles into shared memory, and returns zeros past every edge of a and b, so there
    # is no pointer arithmetic, no mask and no wrap.
    program_id = tl.program_id(axis=0)
    pid_m, pid_n = tile_of_program(
        program_id, M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M
    )
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = descriptor_tile(a_desc, pid_m * BLOCK_SIZE_M, k * BLOCK_SIZE_K, A_COLUMNS)
        b = descriptor_tile(b_desc, k * BLOCK_SIZE_K, pid_n * BLOCK_SIZE_N, B_COLUMNS)
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
    store_output_tile(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
                      BLOCK_SIZE_M, BLOCK_SIZE_N, C_ALIGN, INT64_OFFSETS)


def check_pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` checked as the operands of ``a @ b``: 2D, one floating dtype, a's
    columns as many as b's rows. Returned resolved, as
    :func:`~triton_guide.validation.check_tensor` returns them."""
    a = check_tensor("a", a, ndim=2)
    b = check_tensor("b", b, ndim=2)
    check_same_dtype("a", a, "b", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns ({a.shape[1]}) "
            f"must equal b's rows ({b.shape[0]})"
        )
    return a, b


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Return ``a @ b`` for 2D ``a`` (M x K) and ``b`` (K x N) of the same floating dtype.

    Inputs may have any strides (a transposed view works as is). The result has the inputs'
    dtype; products are accumulated in float32. float32 inputs follow PyTorch's float32
    matmul setting (:mod:`triton_guide.precision`): under "highest", its default, about
    float32's accuracy (``tl.dot`` as "tf32x3"); under "high" or "medium", TF32, faster.
    """
    a, b = check_pair(a, b)
    return _matmul(a, b)


def _launch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # Every decision below (which kernel, copies, the split, c's width) follows from what
    # the key holds; a loop that multiplies matrices of one layout makes them once.
    key = (a.shape, b.shape, a.stride(), b.stride(), a.storage_offset(), b.storage_offset(),
           a.dtype, a.data_ptr() & 15, b.data_ptr() & 15, a.get_device(), COPY_MIN_FLOPS,
           dot_input_precision(a.dtype))  # PyTorch's float32 setting may change any time
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        plan = _plans[key] = _plan(a, b)
    if plan is not None:
        return plan(a, b)
    a, b, descriptors = kernel_inputs(a, b)
    return product(a, b, descriptors=descriptors)


MAX_PLANS = 512
_plans: dict[tuple, object] = {}


def _plan(a: torch.Tensor, b: torch.Tensor):
    """For inputs that the descriptor kernel reads as they are, in one launch: a function
    ``(a, b) -> a @ b`` with every launch argument but the tensors worked out now (what
    :func:`product` works out on each call). None for any other case."""
    a_in, b_in, descriptors = kernel_inputs(a, b)
    (M, K), N = a.shape, b.shape[1]
    if not descriptors or default_split(a, N, K):
        return None
    if (a_in is not a or b_in is not b) and a.dtype != torch.float32:
        return None  # copies: kernel_inputs on each call
    width = output_width(M, N, K, a.element_size())
    constants = dict(A_COLUMNS=stored_by_columns(a_in), B_COLUMNS=stored_by_columns(b_in),
                     C_ALIGN=alignment(width),
                     INT64_OFFSETS=needs_int64_offsets(a_in, b_in, largest_index=M * width - 1),
                     INPUT_PRECISION=dot_input_precision(a.dtype))
    launch = functools.partial(_tma_product, width=width, constants=constants)
    if a_in is a and b_in is b:
        return launch
    return lambda a, b: launch(*kernel_inputs(a, b)[:2])  # float32 copies: see k_major


def _tma_product(a: torch.Tensor, b: torch.Tensor, width: int, constants: dict) -> torch.Tensor:
    """``a @ b`` by one launch of :func:`matmul_tma_kernel`, writing c in rows ``width``
    long (see :func:`output_width`); ``constants``: its other keyword arguments."""
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, width), dtype=a.dtype, device=a.device)

    def grid(meta):
        return (cdiv(M, meta["BLOCK_SIZE_M"]) * cdiv(width, meta["BLOCK_SIZE_N"]),)

    fast_launch(matmul_tma_kernel)[grid](
        descriptor(a), descriptor(b), c, M, width, K, width, 1, **constants)
    return c if width == N else c[:, :N].contiguous()


# On the H100 (50 float16 and bfloat16 products, GPU time) descriptors ran level or ahead of
# pointers in every layout and size, 1 row to 8192 (the largest gap the other way, 3%).
def kernel_inputs(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """What :func:`matmul` hands its kernel for ``a @ b``: ``(a, b, descriptors)``.

    On a GPU with TMA (and under the interpreter), :func:`matmul_tma_kernel` reads a and b
    through descriptors, after :func:`row_aligned` copies of any that a descriptor cannot
    read (a start or rows off 16-byte boundaries, or no stride of 1) unless the product is
    too small to repay them (:func:`product` may pad c's rows too: :func:`output_width`).
    Otherwise :func:`matmul_kernel` reads them through pointers, as they are or as their
    :func:`aligned_copies` (see :func:`aligned_if_worth_it`).
    """
    (M, K), N = a.shape, b.shape[1]
    if has_tma(a.device):
        if a.dtype == torch.float32 and repays_copies(M, N, K):
            a, b = k_major(a, b)
        if descriptor_ready(a) and descriptor_ready(b):
            return a, b, True
        if repays_copies(M, N, K):
            return row_aligned(a), row_aligned(b), True
    return *aligned_if_worth_it(a, b), False


def aligned_if_worth_it(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` as they are, or their :func:`aligned_copies` when rows the kernels
    cannot read 16 bytes at a time would cost more than the copies (``COPY_MIN_FLOPS``)."""
    (M, K), N = a.shape, b.shape[1]
    if repays_copies(M, N, K) and (unaligned_runs(a) or unaligned_runs(b)):
        return aligned_copies(a, b)
    return a, b


def product(a: torch.Tensor, b: torch.Tensor, descriptors: bool,
            split: int | None = None) -> torch.Tensor:
    """``a @ b`` by :func:`matmul_tma_kernel` (``descriptors``, which :func:`descriptor_ready`
    must allow) or :func:`matmul_kernel`, for checked inputs: the launch, the kernel chosen.

    ``split``: the first row of c in TAIL_TILE tiles, launched after the rows above it in
    WAVE_TILE tiles (0: one autotuned launch; by default :func:`default_split` decides); it
    needs the descriptor kernel, 16-bit inputs and a multiple of WAVE_TILE's height."""
    M, K = a.shape
    N = b.shape[1]
    if descriptors and split is None:
        split = default_split(a, N, K)
    if split:
        check_split(split, a, descriptors)
    # The descriptor kernel may write c in rows padded to 16 bytes (see output_width); past
    # b's last column its descriptor reads zeros, so the padding columns hold zeros.
    width = output_width(M, N, K, a.element_size()) if descriptors else N
    common = dict(C_ALIGN=alignment(width),  # c is contiguous: its rows are width apart
                  INT64_OFFSETS=needs_int64_offsets(a, b, largest_index=M * width - 1),
                  INPUT_PRECISION=dot_input_precision(a.dtype))
    if descriptors and not split:
        return _tma_product(a, b, width, dict(A_COLUMNS=stored_by_columns(a),
                                              B_COLUMNS=stored_by_columns(b), **common))
    c = torch.empty((M, width), dtype=a.dtype, device=a.device)
    if descriptors:
        _tile_launch(a[:split], b, c[:split], WAVE_TILE, common)
        _tile_launch(a[split:], b, c[split:], TAIL_TILE, common)
    else:
        (a_columns, a_align), (b_columns, b_align) = layout(a), layout(b)
        def grid(meta):
            return (cdiv(M, meta["BLOCK_SIZE_M"]) * cdiv(N, meta["BLOCK_SIZE_N"]),)

        fast_launch(matmul_kernel)[grid](
            a, b, c, M, N, K,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            A_ALIGN=a_align, B_ALIGN=b_align, A_COLUMNS=a_columns, B_COLUMNS=b_columns,
            **common)
    return c if width == N else c[:, :N].contiguous()


# The last wave. An H100 SM runs one 128 x 256 program at a time (three stages take 144 KiB
# of shared memory), so a last wave of a few tiles leaves most SMs idle: 3072^3 is 288 tiles
# on 132 SMs, two full waves and 24 tiles. Its rows in 128 x 64 tiles by a second launch took
# 3072^3 from 0.82x to 0.91x cuBLAS in float16 (0.79x to 0.89x in bfloat16), gained 4-11%
# after 3 and 4 full waves, nothing after one, and lost where the last wave was fuller
# (2816^3: 83%) or ragged (4095 x 4097 x 4093: 7%) (H100, GPU time). The second launch costs
# the host 45-111 us per call. Hopper only: 144 KiB of stages fit its SMs (not an RTX 50's).
WAVE_TILE = (128, 256, 64, 8, 3, 8)  # BLOCK_SIZE_M, _N, _K, GROUP_SIZE_M, stages, warps
TAIL_TILE = (128, 64, 64, 8, 4, 4)
MAX_TAIL_SHARE = 0.25  # split only where the last wave fills at most this share of the SMs
FULL_WAVES = range(2, 5)  # and comes after this many full waves


def last_wave_split(M: int, N: int, K: int, sms: int) -> int:
    """The row of c from which :func:`product` uses TAIL_TILE tiles, after whole waves of
    WAVE_TILE tiles on ``sms`` SMs (see the comment above); 0 where it keeps one launch."""
    tile_rows, tile_cols, tile_k = WAVE_TILE[:3]
    if N % tile_cols or K % tile_k:
        return 0
    per_row = N // tile_cols
    full_waves, tail = divmod(cdiv(M, tile_rows) * per_row, sms)
    if full_waves not in FULL_WAVES or not 0 < tail <= MAX_TAIL_SHARE * sms:
        return 0
    return full_waves * sms // per_row * tile_rows


def default_split(a: torch.Tensor, N: int, K: int) -> int:
    """The row :func:`product` splits ``a @ b`` at (b of K x N) when not told:
    :func:`last_wave_split` for 16-bit inputs on a Hopper GPU (compute capability 9.x),
    else 0. N is b's own width, not c's padded one: a ragged N stays one launch."""
    if interpreting() or a.element_size() != 2 or compute_capability(a.device)[0] != 9:
        return 0
    return last_wave_split(a.shape[0], N, K, multiprocessors(a.device))


def check_split(split: int, a: torch.Tensor, descriptors: bool) -> None:
    """Raise a ValueError, saying why, unless :func:`product` can split ``a``'s rows at
    ``split``."""
    M, tile_rows = a.shape[0], WAVE_TILE[0]
    problems = []
    if not descriptors:
        problems.append("it needs the descriptor kernel (descriptors=True)")
    if a.element_size() != 2:
        problems.append(f"{str(a.dtype).removeprefix('torch.')} stages of WAVE_TILE overflow "
                        "shared memory: it needs 16-bit inputs")
    if not 0 < split < M:
        problems.append(f"it must lie inside the product's {M} rows")
    if split % tile_rows:
        problems.append(f"it must be a multiple of {tile_rows} rows")
    if problems:
        raise ValueError(f"split={split} cannot be launched: " + "; ".join(problems))


def _tile_launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                 tile: tuple[int, ...], common: dict) -> None:
    """``c = a @ b`` by :func:`matmul_tma_kernel` in one given configuration (no autotuning);
    c's rows may be padded, as :func:`product` makes them."""
    (M, K), width = a.shape, c.shape[1]
    m, n, k, group, stages, warps = tile
    meta = dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=group,
                A_COLUMNS=stored_by_columns(a), B_COLUMNS=stored_by_columns(b))
    a_desc, b_desc = descriptor(a), descriptor(b)
    _set_tile_shapes(dict(meta, a_desc=a_desc, b_desc=b_desc))
    fast_launch(matmul_tma_kernel.fn)[(cdiv(M, m) * cdiv(width, n),)](
        a_desc, b_desc, c, M, width, K, c.stride(0), c.stride(1), num_stages=stages,
        num_warps=warps, **meta, **common)


def output_width(M: int, N: int, K: int, item_size: int) -> int:
    """The row length :func:`matmul_tma_kernel` writes c in: N, or, where N values are not a
    multiple of 16 bytes and the product is large enough to repay one more copy, N rounded
    up to one. Rows that start off a 16-byte boundary are stored one value at a time: on the
    H100 4095 x 4097 x 4093 float16 took 488 us that way, 245 us into rows 4104 long."""
    return padded_length(N, item_size) if repays_copies(M, N, K) else N


# Below this many FLOPs (0.067 GFLOP) matmul copies nothing (aligned_copies, row_aligned,
# or c in padded rows). On the H100 (GPU time, cold L2) aligned copies for the pointer kernel
# were 8% slower at 255 x 257 x 259 and 7% faster at 383 x 385 x 387; the descriptor path's
# copies won in GPU time down to 127 x 129 x 131, but each is one more launch for the host,
# whose time decides at these sizes.
COPY_MIN_FLOPS = 2**26


def repays_copies(M: int, N: int, K: int) -> bool:
    """Whether an M x N x K product is large enough for matmul to copy its inputs or its
    output into better-aligned rows (``COPY_MIN_FLOPS``)."""
    return 2 * M * N * K >= COPY_MIN_FLOPS


def _fake(a, b):
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def _save_inputs(ctx, inputs, output):
    a, b = inputs
    ctx.save_for_backward(a, b)


def _grad(ctx, grad_c):
    # c = a @ b, so dL/da = dL/dc @ b^T and dL/db = a^T @ dL/dc: two more matmuls, with
    # transposed views (no copies). They go through the op again, so they differentiate too.
    a, b = ctx.saved_tensors
    grad_a = _matmul(grad_c, b.t()) if ctx.needs_input_grad[0] else None
    grad_b = _matmul(a.t(), grad_c) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


# Autograd and torch.compile: see triton_guide.library.
_matmul = Operator("matmul", _launch, fake=_fake, backward=_grad, setup_context=_save_inputs)


def _example(device):
    return (torch.randn(21, 16, device=device), torch.randn(16, 9, device=device)), {}


register("matmul", matmul, matmul_reference, example=_example, differentiable=True,
         compile_safe=True)
