"""Pipelining and warp specialisation: a matrix product and an attention forward pass whose
launch knobs are arguments, for the Hopper page that measures what each knob buys.

Both kernels read their tiles through tensor descriptors and run one fixed tile shape, so
that only the knob under study changes between two launches:

* ``num_stages`` (a launch parameter): how many iterations of the loop over K (over the
  keys) the compiler keeps in flight. With ``s`` stages, the tiles of the next ``s - 1``
  iterations are being copied into shared memory while the current one is multiplied;
  each stage takes its own buffers there (:func:`stage_bytes`).
* ``num_warps`` (a launch parameter): the warps of one program, which split its tile.
* ``warp_specialize`` (an argument of the loop's ``tl.range``): asks the compiler to give
  the copies and the multiplications to different warps, which then run side by side.
  Whether a Triton version and GPU can do it is for the caller to find out: an unsupported
  combination fails to compile, or compiles unchanged (:func:`compiler_facts` says which).

:func:`matmul_pipelined` computes ``a @ b`` (2D, any floating dtype); :func:`attention_pipelined`
computes ``softmax(q @ k^T * sm_scale) @ v`` without a mask, for q, k and v of one shape
(batch, heads, seq, head_dim) with head_dim a power of two from 16 to 128.
``launch_matmul`` and ``launch_attention`` also return the compiled kernel (None under the
interpreter), for :func:`compiler_facts`.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .attention_decode import new_outputs, online_softmax_step, qk_scale_of, store_rows
from .attention_tiles import descriptor, tma_layout
from .matmul import check_pair, row_aligned, tile_of_program
from .matmul_steps import store_tile
from .precision import dot_input_precision
from .runtime import interpreting
from .testing import assert_close
from .validation import check_bool, check_int, check_same_dtype, check_tensor

# The tiles this page's knobs are measured on: the matmul's (BLOCK_SIZE_M, _N, _K), one
# of the autotuner's large tiles in triton_guide.matmul, and the attention forward's
# (BLOCK_M, BLOCK_N), the package's first choice for head_dim 128.
MATMUL_TILE = (128, 128, 64)
ATTENTION_TILE = (128, 64)
GROUP_SIZE_M = 8
WARP_COUNTS = (1, 2, 4, 8, 16)


@triton.jit
def matmul_pipelined_kernel(
    a_desc, b_desc,  # tensor descriptors over a (M x K) and b (K x N), both stored by rows
    c_ptr, M, N, K, stride_cm, stride_cn,
    BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,  # copies and products in separate warps (see tl.range)
    INPUT_PRECISION: tl.constexpr,  # tl.dot's for float32 operands (triton_guide.precision)
):
    # The lesson's tile loop with its tiles fetched through descriptors. num_stages, a launch
    # parameter, decides how many iterations of this loop are in flight at once.
    pid_m, pid_n = tile_of_program(tl.program_id(axis=0), M, N, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                   GROUP_SIZE_M)
    row = pid_m * BLOCK_SIZE_M
    col = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=WARP_SPECIALIZE):
        # Past the edges of a and b the descriptors read zeros, which add nothing.
        a = a_desc.load([row, k * BLOCK_SIZE_K])
        b = b_desc.load([k * BLOCK_SIZE_K, col])
        accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
    store_tile(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn,
               BLOCK_SIZE_M, BLOCK_SIZE_N)


@triton.jit
def attention_pipelined_kernel(
    q_desc, k_desc, v_desc,  # tensor descriptors over (batch, heads, seq, HEAD_DIM)
    out_ptr,  # (batch, heads, num_queries, HEAD_DIM), contiguous
    lse_ptr, max_ptr, log2sum_ptr,  # (batch * heads, num_queries) float32 each
    num_heads, num_queries, num_keys, qk_scale,  # qk_scale = sm_scale * log2(e)
    HEAD_DIM: tl.constexpr,  # a power of two
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per iteration
    WARP_SPECIALIZE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    # The package's forward loop without masks other than the keys' end: every row sees
    # every key, so each row's maximum is finite from the first block on.
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    first_row = tl.program_id(0) * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = q_desc.load([batch, head, first_row, 0]).reshape(BLOCK_M, HEAD_DIM)
    row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in tl.range(0, num_keys, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([batch, head, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
        # Keys past the end were read as zeros, which would score 0: hide them.
        scores = tl.where((start_n + offs_n < num_keys)[None, :], scores, -float("inf"))
        probs, correction, row_max, row_sum = online_softmax_step(
            scores, row_max, row_sum, qk_scale, False)
        v = v_desc.load([batch, head, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = tl.dot(probs.to(v.dtype), v, acc * correction[:, None],
                     input_precision=DOT_PRECISION)
    head_rows = batch_head.to(tl.int64) * num_queries
    store_rows(out_ptr, lse_ptr, max_ptr, log2sum_ptr, acc, row_sum, row_max, head_rows,
               offs_m, offs_m < num_queries, qk_scale, HEAD_DIM)


def check_knobs(num_stages: object, num_warps: object, warp_specialize: object):
    """The three knobs checked: ``num_stages`` a positive int, ``num_warps`` one of
    WARP_COUNTS, ``warp_specialize`` a bool; returned as Python values."""
    num_stages = check_int("num_stages", num_stages)
    if num_stages < 1:
        raise ValueError(f"num_stages must be at least 1 (1: no pipelining), got {num_stages}")
    num_warps = check_int("num_warps", num_warps)
    if num_warps not in WARP_COUNTS:
        raise ValueError(f"num_warps must be one of {WARP_COUNTS}, got {num_warps}")
    return num_stages, num_warps, check_bool("warp_specialize", warp_specialize)


def check_tile(name: str, tile: object, length: int) -> tuple[int, ...]:
    """``tile`` as a tuple of ``length`` powers of two, each at least 16."""
    if not isinstance(tile, (tuple, list)) or len(tile) != length:
        raise TypeError(f"{name} must be a tuple of {length} ints, got {tile!r}")
    sizes = tuple(check_int(name, size, expected="a tuple of ints") for size in tile)
    if any(size < 16 or size & (size - 1) for size in sizes):
        raise ValueError(f"{name} must hold powers of two of at least 16, got {sizes}")
    return sizes


def launch_matmul(a: torch.Tensor, b: torch.Tensor, *, num_stages: int = 3,
                  num_warps: int = 4, warp_specialize: bool = False,
                  tile: tuple[int, int, int] = MATMUL_TILE):
    """``(a @ b, compiled kernel)`` by one launch of :func:`matmul_pipelined_kernel` with
    the knobs given; the compiled kernel is None under the interpreter."""
    a, b = check_pair(a, b)
    num_stages, num_warps, warp_specialize = check_knobs(num_stages, num_warps,
                                                         warp_specialize)
    block_m, block_n, block_k = check_tile("tile", tile, 3)
    # Stored by rows, each row starting on a 16-byte boundary, as a descriptor reads them.
    a, b = row_aligned(a.contiguous()), row_aligned(b.contiguous())
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    a_desc = TensorDescriptor(a, list(a.shape), list(a.stride()), [block_m, block_k])
    b_desc = TensorDescriptor(b, list(b.shape), list(b.stride()), [block_k, block_n])
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    compiled = matmul_pipelined_kernel[grid](
        a_desc, b_desc, c, M, N, K, c.stride(0), c.stride(1),
        BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n, BLOCK_SIZE_K=block_k,
        GROUP_SIZE_M=GROUP_SIZE_M, WARP_SPECIALIZE=warp_specialize,
        INPUT_PRECISION=dot_input_precision(a.dtype), num_stages=num_stages,
        num_warps=num_warps)
    return c, _compiled_or_none(compiled)


def matmul_pipelined(a: torch.Tensor, b: torch.Tensor, **knobs) -> torch.Tensor:
    """``a @ b`` for 2D a (M x K) and b (K x N) of one floating dtype, by
    :func:`matmul_pipelined_kernel` with ``num_stages``, ``num_warps``,
    ``warp_specialize`` and ``tile`` as given (see :func:`launch_matmul`)."""
    return launch_matmul(a, b, **knobs)[0]


def launch_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                     sm_scale: float | None = None, num_stages: int = 2, num_warps: int = 4,
                     warp_specialize: bool = False,
                     tile: tuple[int, int] = ATTENTION_TILE):
    """``(output, compiled kernel)`` by one launch of :func:`attention_pipelined_kernel`;
    the compiled kernel is None under the interpreter."""
    q = check_tensor("q", q, ndim=4)
    k = check_tensor("k", k, ndim=4)
    v = check_tensor("v", v, ndim=4)
    check_same_dtype("q", q, "k", k)
    check_same_dtype("q", q, "v", v)
    if not q.shape == k.shape == v.shape:
        raise ValueError(f"q, k and v must have one shape (batch, heads, seq, head_dim), got "
                         f"{tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}")
    head_dim = q.shape[-1]
    if head_dim not in (16, 32, 64, 128):
        raise ValueError(f"head_dim (q.shape[-1]) must be 16, 32, 64 or 128, got {head_dim}")
    num_stages, num_warps, warp_specialize = check_knobs(num_stages, num_warps,
                                                         warp_specialize)
    block_m, block_n = check_tile("tile", tile, 2)
    sm_scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    batch, heads, num_queries, _ = q.shape
    out, lse, stats = new_outputs(q)
    # Descriptors as the package's attention makes them (tma_layout copies a layout TMA
    # cannot read; head_dim, a power of two of at least 16, needs no padding).
    q_desc, k_desc, v_desc = (descriptor(tma_layout(t), rows, head_dim)
                              for t, rows in ((q, block_m), (k, block_n), (v, block_n)))
    grid = (triton.cdiv(num_queries, block_m), batch * heads)
    compiled = attention_pipelined_kernel[grid](
        q_desc, k_desc, v_desc, out, lse, stats[0], stats[1], heads, num_queries,
        k.shape[2], qk_scale_of(sm_scale), HEAD_DIM=head_dim, BLOCK_M=block_m,
        BLOCK_N=block_n, WARP_SPECIALIZE=warp_specialize,
        DOT_PRECISION=dot_input_precision(q.dtype), num_stages=num_stages,
        num_warps=num_warps)
    return out, _compiled_or_none(compiled)


def attention_pipelined(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        **knobs) -> torch.Tensor:
    """``softmax(q @ k^T * sm_scale) @ v`` (no mask) by :func:`attention_pipelined_kernel`
    with the knobs given (see :func:`launch_attention`)."""
    return launch_attention(q, k, v, **knobs)[0]


def _compiled_or_none(handle):
    """What a launch returned, if it is a compiled kernel (the interpreter returns none)."""
    return handle if hasattr(handle, "metadata") else None


def compiler_facts(compiled) -> dict | None:
    """What the compiler made of one launch: the shared memory it allocated (bytes), its
    warps, registers and spills per thread, and whether it split the loop into warp
    partitions (a ``ttg.warp_specialize`` region in its TritonGPU IR). None under the
    interpreter, which compiles nothing."""
    if compiled is None:
        return None
    return {"shared_bytes": int(compiled.metadata.shared),
            "num_warps": int(compiled.metadata.num_warps),
            "registers": int(getattr(compiled, "n_regs", -1) or -1),
            "spills": int(getattr(compiled, "n_spills", -1) or 0),
            "warp_specialized": "ttg.warp_specialize" in compiled.asm.get("ttgir", "")}


def stage_bytes(tiles: list[tuple[int, int]], item_size: int) -> int:
    """Shared memory one pipeline stage takes: one buffer for each tile in ``tiles`` (rows,
    columns) of ``item_size``-byte elements."""
    return sum(rows * cols for rows, cols in tiles) * item_size


def programs_per_sm(per_program: int, per_sm: int, per_program_limit: int) -> int:
    """How many programs an SM holds when each needs ``per_program`` bytes of shared
    memory (0: the program cannot run, it needs more than ``per_program_limit``)."""
    return 0 if per_program > per_program_limit else per_sm // per_program


def short_error(error: BaseException) -> str:
    """An exception as its type and the first line of its message, without paths (a
    compiler's message names files on the machine that compiled it)."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    if "/" in first or len(first) > 100:
        return type(error).__name__
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def check_variants(launch, inputs: tuple, reference: torch.Tensor, rtol: float,
                   variants: dict[str, dict], stages: list[int]) -> dict[str, dict]:
    """Launch ``launch(*inputs, num_stages=s, **knobs)`` for every variant (name -> knobs)
    and stage count ``s``, and compare each result with ``reference``.

    Returns ``{name: {s: outcome}}``, an outcome being ``{"error": relative error, **facts}``
    (:func:`compiler_facts`, none under the interpreter) or ``{"failure": what was raised}``
    (:func:`short_error`) where this Triton and GPU could not compile or run the knobs
    (under the interpreter, which compiles nothing, anything raised propagates). A wrong
    result raises an AssertionError (:func:`~triton_guide.testing.assert_close`)."""
    outcomes: dict[str, dict] = {}
    for name, knobs in variants.items():
        outcomes[name] = {}
        for num_stages in stages:
            try:
                result, compiled = launch(*inputs, num_stages=num_stages, **knobs)
            except Exception as error:  # CompilationError, OutOfResources, RuntimeError, ...
                if interpreting():  # which compiles nothing: any error is a mistake
                    raise
                outcomes[name][num_stages] = {"failure": short_error(error)}
                continue
            error = assert_close(result, reference, rtol=rtol, name=f"{name}, {num_stages} stages")
            outcomes[name][num_stages] = {"error": error, **(compiler_facts(compiled) or {})}
    return outcomes


def print_outcomes(outcomes: dict[str, dict]) -> None:
    """One row per variant, one column per stage count: the relative error, and on a GPU the
    shared memory the compiler allocated and whether it split the loop into warp partitions
    ("ws"); or the type of what was raised."""
    stages = list(next(iter(outcomes.values())))
    print(f"{'num_stages':<27}" + "".join(f"{s:>10}" for s in stages))
    for name, row in outcomes.items():
        cells = []
        for outcome in row.values():
            if "failure" in outcome:
                cells.append(outcome["failure"].split(":")[0])
            elif "shared_bytes" in outcome:
                ws = " ws" if outcome["warp_specialized"] else ""
                cells.append(f"{outcome['shared_bytes'] / 1024:.0f} KiB{ws}")
            else:
                cells.append(f"{outcome['error']:.1e}")
        print(f"{name:<27}" + "".join(f"{cell:>10}" for cell in cells))
    errors = [o["error"] for row in outcomes.values() for o in row.values() if "error" in o]
    if errors:
        print(f"  {len(errors)} launches matched float64; the worst relative error {max(errors):.1e}")
    failures = {o["failure"] for row in outcomes.values() for o in row.values() if "failure" in o}
    for failure in sorted(failures):
        print(f"  raised: {failure}")


def runnable(outcomes: dict[str, dict]) -> list[str]:
    """The variants that compiled, ran and matched the reference at every stage count."""
    return [name for name, row in outcomes.items()
            if all("failure" not in outcome for outcome in row.values())]


# Compiled and run in a child process by :func:`warp_specialize_refusal`.
_WARP_SPECIALIZE_PROBE = """
import time
import torch
from triton_guide import compiled
from triton_guide.pipelining import launch_attention, launch_matmul
a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
q = torch.randn(1, 2, 256, 128, device="cuda", dtype=torch.float16)
calls = [(launch_matmul, (a, a.t().contiguous()), dict(num_stages=3, warp_specialize=True)),
         (launch_attention, (q, q, q), dict(num_stages=2, num_warps=8, warp_specialize=True))]
for call, args, kwargs in calls:  # compiled for this GPU in a process of its own, not run
    started = time.time()
    compiled.compile_for(compiled.record_launches(call, *args, **kwargs)[:1],
                         capability=int("".join(map(str, torch.cuda.get_device_capability()))))
    print(f"compiled {call.__name__} in {time.time() - started:.0f} s", flush=True)
for call, args, kwargs in calls:
    call(*args, **kwargs)
    torch.cuda.synchronize()
    print(f"ran {call.__name__}", flush=True)
"""


def warp_specialize_refusal(timeout_s: float = 60.0) -> str | None:
    """None where both kernels compile and run with ``warp_specialize=True`` on this GPU and
    Triton, else why not, in a few words. The attempt runs in a child process with a time
    limit, so that a compiler that crashes or never finishes, or a kernel that never
    returns, costs that process only. Under the interpreter, which compiles nothing and
    ignores the flag: None, without trying."""
    if interpreting():
        return None
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    try:
        child = subprocess.run([sys.executable, "-c", _WARP_SPECIALIZE_PROBE],
                               capture_output=True, text=True, timeout=timeout_s,
                               env={**os.environ, "PYTHONPATH": path})
    except subprocess.TimeoutExpired as timeout:
        said = timeout.stdout or ""
        said = said.decode() if isinstance(said, bytes) else said
        if said.count("compiled ") == 2:
            return (f"both kernels compiled, but a first launch did not finish within "
                    f"{timeout_s:.0f} s")
        return f"compiling did not finish within {timeout_s:.0f} s"
    if child.returncode == 0:
        return None
    lines = [line for line in child.stderr.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if child.returncode < 0 or not last:
        return f"the process compiling and running a first launch died (status {child.returncode})"
    # The error's last line, "Type: message"; only its type where the message names files.
    return last if "/" not in last and len(last) <= 100 else last.split(":")[0]

