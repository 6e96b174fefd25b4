"""Gluon kernels for Hopper (sm_90): a copy kernel and a matmul.

Gluon is Triton's lower-level language (``triton.experimental.gluon``): the program states
the layout of every tensor (which thread holds which element), allocates shared memory
and mbarriers itself, issues TMA copies and ``wgmma`` (``warpgroup_mma``) explicitly, and
orders them with barrier waits. Nothing is chosen for it by the compiler's pipeliner.

* :func:`copy_kernel` is the smallest Gluon program: a masked load and store through an
  explicit :class:`~triton.experimental.gluon.language.BlockedLayout`.
* :func:`matmul_kernel` computes one output tile per program: ``STAGES`` shared-memory
  slots for tiles of ``a`` and ``b``, each slot filled by TMA and signalled by its own
  mbarrier; ``warpgroup_mma`` accumulates in float32 registers while the next tiles load;
  the tile is written back through shared memory by a TMA store. Tiles are visited in
  groups of ``GROUP_M`` rows of tiles so that neighbouring programs share tiles in L2.

Gluon has no interpreter mode, and these kernels use Hopper's instructions: they run only on
an sm_90 GPU (H100, H200). The module imports on any machine (nothing is compiled at
import) and can compile its kernels for sm_90 without a GPU (:func:`compile_for_sm90`).

Written for Triton 3.6 (the GPU image's). Triton 3.9 names the TMA copies
``tma.async_load`` and ``tma.async_store`` (3.6: ``tma.async_copy_global_to_shared`` and
``tma.async_copy_shared_to_global``, names 3.9 keeps only to raise an error), and its
``mbarrier.expect`` calls the byte count ``bytes_per_cta`` (passed by position here): the
module picks the names this Triton has, and compiles with 3.6 and with 3.9.
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .hardware import compute_capability

# The TMA copies under this Triton's names (3.6: async_copy_global_to_shared and
# async_copy_shared_to_global; 3.9: async_load and async_store).
tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}
NEEDS = "Gluon kernels for sm_90 run only on an sm_90 GPU (H100, H200)"


# --- the copy kernel -----------------------------------------------------------------------


@gluon.jit
def copy_kernel(source, destination, n_elements,
                BLOCK: gl.constexpr,  # elements per program
                layout: gl.constexpr):  # a BlockedLayout: which thread holds which element
    # The layout covers size_per_thread * 32 * num_warps elements; a BLOCK that is a multiple
    # of that gives each thread BLOCK / (32 * num_warps) elements in runs of size_per_thread.
    start = gl.program_id(0).to(gl.int64) * BLOCK
    offsets = start + gl.arange(0, BLOCK, layout=layout)
    in_bounds = offsets < n_elements
    values = gl.load(source + offsets, mask=in_bounds)
    gl.store(destination + offsets, values, mask=in_bounds)


def copy_layout(element_size: int, num_warps: int) -> gl.BlockedLayout:
    """A 1-D layout in which each thread holds 16 contiguous bytes (one 128-bit access)."""
    return gl.BlockedLayout(size_per_thread=[16 // element_size], threads_per_warp=[32],
                            warps_per_cta=[num_warps], order=[0])


COPY_BLOCK = 4096
COPY_WARPS = 4


def gluon_copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of contiguous ``x`` by :func:`copy_kernel`. Needs an sm_90 GPU (see
    :func:`check_device`)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    check_device("x", x)
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (the copy kernel reads it as one flat run)")
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        layout = copy_layout(x.element_size(), COPY_WARPS)
        copy_kernel[(triton.cdiv(n, COPY_BLOCK),)](x, out, n, COPY_BLOCK, layout,
                                                    num_warps=COPY_WARPS)
    return out


# --- the matmul kernel ---------------------------------------------------------------------


@gluon.jit
def grouped_tile(tile, M, N, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 GROUP_M: gl.constexpr):
    """(row, column) of the first element of program ``tile``'s output tile, tiles taken
    column by column within bands of GROUP_M rows of tiles."""
    rows_of_tiles = gl.cdiv(M, BLOCK_M)
    columns_of_tiles = gl.cdiv(N, BLOCK_N)
    tiles_per_band = GROUP_M * columns_of_tiles
    band = tile // tiles_per_band
    first_row = band * GROUP_M
    band_height = gl.minimum(rows_of_tiles - first_row, GROUP_M)
    within = tile % tiles_per_band
    tile_m = first_row + within % band_height
    tile_n = within // band_height
    return tile_m * BLOCK_M, tile_n * BLOCK_N


@gluon.jit
def matmul_kernel(a_desc, b_desc, c_desc,  # TMA descriptors of a (M x K), b (K x N), c (M x N)
                  M, N, K,
                  acc_layout: gl.constexpr,  # NVMMADistributedLayout (wgmma v3) of the accumulator
                  GROUP_M: gl.constexpr,  # rows of tiles per band of the grouped order
                  STAGES: gl.constexpr):  # shared-memory slots for tiles of a and b
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    off_m, off_n = grouped_tile(gl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    # STAGES slots per operand, and one barrier per slot: a slot's barrier completes a
    # phase when both of its TMA copies have landed (the bytes expected by expect()).
    a_slots = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_slots = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    loaded = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(loaded.index(s), count=1)
    tile_bytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    k_tiles = gl.cdiv(K, BLOCK_K)

    # Fill the first STAGES - 1 slots. Copies past K (predicated off) load nothing; TMA
    # fills the parts of a tile beyond the matrix with zeros, so ragged edges add zero.
    for s in gl.static_range(STAGES - 1):
        wanted = s < k_tiles
        mbarrier.expect(loaded.index(s), tile_bytes, pred=wanted)
        tma_load(a_desc, [off_m, s * BLOCK_K], loaded.index(s), a_slots.index(s), pred=wanted)
        tma_load(b_desc, [s * BLOCK_K, off_n], loaded.index(s), b_slots.index(s), pred=wanted)

    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, acc_layout)
    for k_tile in range(k_tiles):
        slot = k_tile % STAGES
        # The slot is refilled once per lap of the ring; its barrier's phase flips each lap.
        mbarrier.wait(loaded.index(slot), (k_tile // STAGES) & 1)
        acc = warpgroup_mma(a_slots.index(slot), b_slots.index(slot), acc, is_async=True)
        # Let this product run on while waiting for the one before it: once at most one is
        # in flight, the previous slot is no longer read and can take the next tile.
        acc, _, _ = warpgroup_mma_wait(num_outstanding=1,
                                       deps=(acc, a_slots.index(slot), b_slots.index(slot)))
        ahead = k_tile + STAGES - 1
        refill = ahead % STAGES  # the slot read by the product that just finished
        wanted = ahead < k_tiles
        mbarrier.expect(loaded.index(refill), tile_bytes, pred=wanted)
        tma_load(a_desc, [off_m, ahead * BLOCK_K], loaded.index(refill),
                 a_slots.index(refill), pred=wanted)
        tma_load(b_desc, [ahead * BLOCK_K, off_n], loaded.index(refill),
                 b_slots.index(refill), pred=wanted)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(loaded.index(s))

    # Registers -> shared memory -> global by TMA, which drops the rows and columns of the
    # tile that lie beyond M or N.
    c_tile = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], c_desc.layout)
    c_tile.store(acc.to(dtype))
    fence_async_shared()  # order the register stores before the TMA engine reads the tile
    tma_store(c_desc, [off_m, off_n], c_tile)
    tma.store_wait(0)


@dataclasses.dataclass(frozen=True)
class MatmulConfig:
    """Tile shape and launch options of :func:`matmul_kernel`."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    stages: int = 3
    num_warps: int = 8
    group_m: int = 8

    def accumulator_layout(self) -> gl.NVMMADistributedLayout:
        """The accumulator's wgmma layout: warps stacked along M (16 rows each, four warps
        a warp group), one wgmma instruction as wide as the tile (at most 256 columns)."""
        if self.block_m < 16 * self.num_warps or self.num_warps % 4:
            raise ValueError(f"block_m={self.block_m} with num_warps={self.num_warps}: wgmma "
                             "needs warp groups of 4 warps and 16 rows per warp")
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[self.num_warps, 1],
                                         instr_shape=[16, min(self.block_n, 256), 16])


# Shared memory per program is the slots' (the compiler places the output tile in their
# memory once the loop is done). 128 x 256 tiles, 8 warps (two warp groups of 64 rows),
# 3 stages: 144 KiB, one program per SM.
DEFAULT_CONFIG = MatmulConfig()
# 128 x 128 tiles, one warp group: twice the programs, for products with few tiles; with
# 4 stages (128 KiB) one program fits on an SM, with 3 stages (96 KiB) two.
CONFIGS = {
    "128x256x64 s3 w8": DEFAULT_CONFIG,
    "128x128x64 s4 w4": MatmulConfig(block_n=128, stages=4, num_warps=4),
    "128x128x64 s3 w4": MatmulConfig(block_n=128, stages=3, num_warps=4),
}


def _descriptor(base: torch.Tensor, shape, strides, block_shape):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    layout = gl.NVMMASharedLayout.get_default_for(list(block_shape), _GL_DTYPES[base.dtype])
    return TensorDescriptor(base, list(shape), list(strides), list(block_shape), layout)


def matmul_launch(a_base: torch.Tensor, b_base: torch.Tensor, c_base: torch.Tensor,
                  M: int, N: int, K: int, a_row_stride: int, b_row_stride: int,
                  c_row_stride: int, config: MatmulConfig = DEFAULT_CONFIG):
    """The grid, arguments and options of one :func:`matmul_kernel` launch for row-major
    a (M x K), b (K x N) and c (M x N) starting at the three bases with these row strides
    (elements; each a multiple of 16 bytes). Shared by the launcher and
    :func:`compile_for_sm90`, which passes small stand-ins for the bases."""
    cfg = config
    a_desc = _descriptor(a_base, (M, K), (a_row_stride, 1), (cfg.block_m, cfg.block_k))
    b_desc = _descriptor(b_base, (K, N), (b_row_stride, 1), (cfg.block_k, cfg.block_n))
    c_desc = _descriptor(c_base, (M, N), (c_row_stride, 1), (cfg.block_m, cfg.block_n))
    grid = (triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n),)
    args = (a_desc, b_desc, c_desc, M, N, K, cfg.accumulator_layout(), cfg.group_m, cfg.stages)
    return grid, args, {"num_warps": cfg.num_warps}


# --- the launcher --------------------------------------------------------------------------


def check_device(name: str, x: torch.Tensor) -> None:
    """Refuse a tensor that is not on an sm_90 CUDA GPU, naming it."""
    if x.device.type != "cuda":
        raise ValueError(f"{name} is on {x.device}; {NEEDS}, and {name} must be a CUDA "
                         "tensor on one")
    capability = compute_capability(x.device)
    if capability != (9, 0):
        raise ValueError(f"{name} is on a GPU of compute capability {capability[0]}."
                         f"{capability[1]}; {NEEDS} (compute capability 9.0)")


def _tma_ready(x: torch.Tensor) -> bool:
    """Whether TMA can read row-major ``x`` where it lies: unit column stride, a row stride
    and a start address that are multiples of 16 bytes."""
    size = x.element_size()
    return (x.stride(1) == 1 and (x.stride(0) * size) % 16 == 0
            and x.data_ptr() % 16 == 0 and x.stride(0) >= x.shape[1])


def tma_operand(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself where TMA can read it (:func:`_tma_ready`); otherwise a copy whose rows
    start 16 bytes apart (rows padded, the padding never read: the descriptor's shape
    stops at ``x``'s width)."""
    if _tma_ready(x):
        return x
    rows, columns = x.shape
    per_16_bytes = 16 // x.element_size()
    width = triton.cdiv(max(columns, 1), per_16_bytes) * per_16_bytes
    padded = torch.empty((rows, width), dtype=x.dtype, device=x.device)
    padded[:, :columns].copy_(x)
    return padded[:, :columns]


def check_operands(a, b) -> None:
    """Refuse anything but 2-D fp16/bf16 ``a`` (M x K) and ``b`` (K x N) of one dtype on an
    sm_90 GPU, naming the argument at fault."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got {x.dim()}-D of shape {tuple(x.shape)}")
        if x.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} has dtype {x.dtype}; the Gluon matmul supports "
                            "torch.float16 and torch.bfloat16 (accumulating in float32)")
    if a.dtype != b.dtype:
        raise TypeError(f"a is {a.dtype} and b is {b.dtype}: both must have one dtype")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns "
                         f"({a.shape[1]}) must equal b's rows ({b.shape[0]})")
    check_device("a", a)
    check_device("b", b)
    if a.device != b.device:
        raise ValueError(f"a is on {a.device} and b on {b.device}: both must be on one GPU")


def gluon_matmul(a: torch.Tensor, b: torch.Tensor,
                 config: MatmulConfig = DEFAULT_CONFIG) -> torch.Tensor:
    """``a @ b`` by :func:`matmul_kernel` for fp16 or bf16 ``a`` (M x K) and ``b`` (K x N),
    accumulated in float32, returned in the inputs' dtype.

    Runs only on an sm_90 GPU (H100, H200): Gluon has no interpreter, and the kernel uses
    TMA and wgmma. An operand that TMA cannot read where it lies (a row stride or start
    that is not a multiple of 16 bytes, e.g. an odd width, or a transposed view) is copied
    first into rows 16 bytes aligned; so is the result when N is not a multiple of 8.
    """
    check_operands(a, b)
    (M, K), N = a.shape, b.shape[1]
    if M == 0 or N == 0 or K == 0:
        return torch.zeros((M, N), dtype=a.dtype, device=a.device)
    a, b = tma_operand(a), tma_operand(b)
    per_16_bytes = 16 // a.element_size()
    width = triton.cdiv(N, per_16_bytes) * per_16_bytes
    c = torch.empty((M, width), dtype=a.dtype, device=a.device)
    grid, args, options = matmul_launch(a, b, c, M, N, K, a.stride(0), b.stride(0), width,
                                        config)
    matmul_kernel[grid](*args, **options)
    return c if width == N else c[:, :N].contiguous()


# --- compiling for sm_90 without a GPU -------------------------------------------------------


@dataclasses.dataclass
class CompiledKernel:
    """What the compiler made of one kernel for sm_90 (from :func:`compile_for_sm90`)."""

    name: str
    triton_version: str
    registers: int  # per thread (cuobjdump -res-usage)
    local_bytes: int  # per thread: spilled registers and local arrays (STACK + LOCAL)
    shared: int  # bytes per program asked for at launch (the kernel's metadata)
    num_warps: int
    ptx: str
    sass: str

    @property
    def spills(self) -> int:
        return self.local_bytes // 4

    def occupancy(self):
        """Programs of this kernel that fit on one sm_90 SM (:func:`compiled.occupancy`)."""
        from .compiled import occupancy

        return occupancy(self.registers, self.shared, self.num_warps)

    def loop(self) -> list[str]:
        """The PTX lines of its busiest inner loop (:func:`compiled.inner_loop`)."""
        from .compiled import inner_loop

        return inner_loop(self.ptx)


def _stand_in(dtype: torch.dtype) -> torch.Tensor:
    # A descriptor records a base address, a shape and strides; compiling reads none of
    # the memory, so a small, 16-byte aligned tensor stands in for each matrix.
    return torch.empty(64, dtype=dtype)


def _compile_request(request: dict) -> list[dict]:
    from triton.experimental.gluon._runtime import GluonASTSource

    from .compiled import compile_kernel

    results = []
    for job in request["jobs"]:
        dtype = getattr(torch, job["dtype"])
        if job["kernel"] == "copy":
            kernel = copy_kernel
            args = (_stand_in(dtype), _stand_in(dtype), job["n"], COPY_BLOCK,
                    copy_layout(dtype.itemsize, COPY_WARPS))
            kwargs = {"num_warps": COPY_WARPS}
        else:
            kernel = matmul_kernel
            M, N, K = job["shape"]
            _, args, kwargs = matmul_launch(_stand_in(dtype), _stand_in(dtype),
                                            _stand_in(dtype), M, N, K, K, N, N,
                                            CONFIGS[job["config"]])
        made = compile_kernel(kernel, list(args), kwargs, 90, source=GluonASTSource)
        results.append({"name": job["name"], "triton_version": triton.__version__,
                        **{key: made[key] for key in ("registers", "local_bytes", "shared",
                                                      "num_warps", "ptx", "sass")}})
    return results


DEFAULT_JOBS = (
    {"name": "copy fp16", "kernel": "copy", "dtype": "float16", "n": 1 << 20},
    *({"name": f"matmul {short} {config}", "kernel": "matmul", "dtype": dtype,
       "shape": [4096, 4096, 4096], "config": config}
      for config in CONFIGS for dtype, short in (("float16", "fp16"), ("bfloat16", "bf16"))),
)


def compile_for_sm90(jobs=DEFAULT_JOBS, python_path: str | None = None,
                     timeout: float = 600) -> list[CompiledKernel]:
    """Compile the kernels named by ``jobs`` for sm_90 in a new Python process, which needs
    no GPU (Triton compiles for an explicit target; its wheel ships ptxas and cuobjdump).
    ``python_path``: folders put first on that process's path, e.g. another Triton's
    site-packages, to compile with that version."""
    from .compiled import run_compiling_process

    return [CompiledKernel(**fields) for fields in run_compiling_process(
        "triton_guide.gluon_matmul", {"jobs": list(jobs)}, python_path=python_path,
        timeout=timeout)]


if __name__ == "__main__":
    print(json.dumps(_compile_request(json.loads(sys.stdin.read()))))
