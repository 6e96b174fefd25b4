"""The Gluon kernels for sm_90 (triton_guide.gluon_matmul).

Three kinds of test: compiled for sm_90 with the installed Triton, on any machine (no GPU
needed); run and checked against float64, only on an sm_90 GPU; and the launchers'
refusals, on any machine.
"""

import subprocess
import sys

import pytest
import torch

from triton_guide import compiled as compiled_tools
from triton_guide import gluon_matmul as gm
from triton_guide.testing import assert_close, tolerance

ON_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_sm90 = pytest.mark.skipif(
    not ON_SM90, reason="Gluon's sm_90 kernels run only on an sm_90 GPU (H100, H200): Gluon "
    "has no interpreter, and the matmul uses TMA and wgmma")
MATMUL_JOBS = [job for job in gm.DEFAULT_JOBS if job["kernel"] == "matmul"]


# --- compiled for sm_90, on any machine ------------------------------------------------------


@pytest.fixture(scope="module")
def kernels():
    """Every default job compiled for sm_90 in one child process, by name."""
    results = {k.name: k for k in gm.compile_for_sm90()}
    for k in results.values():
        print(f"{k.name} (triton {k.triton_version}): {k.registers} registers, "
              f"{k.spills} spills, {k.shared} bytes of shared memory")
    return results


@pytest.mark.parametrize("job", gm.DEFAULT_JOBS, ids=[job["name"] for job in gm.DEFAULT_JOBS])
def test_compiles_for_sm90_without_spills(kernels, job):
    kernel = kernels[job["name"]]
    assert ".target sm_90a" in kernel.ptx
    assert 0 < kernel.registers <= 255
    assert kernel.spills == 0, f"{kernel.name} spills {kernel.local_bytes} bytes per thread"
    assert compiled_tools.spill_instructions(kernel.sass) == {}


@pytest.mark.parametrize("job", MATMUL_JOBS, ids=[job["name"] for job in MATMUL_JOBS])
def test_matmul_pipeline_is_tma_mbarrier_and_wgmma(kernels, job):
    kernel = kernels[job["name"]]
    config = gm.CONFIGS[job["config"]]
    for instruction in ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait",
                        "mbarrier.arrive.expect_tx"):
        assert instruction in kernel.ptx, f"{instruction} missing from {kernel.name}'s PTX"
    # The main loop: one tile-pair refill by TMA and one BLOCK_K-deep product per step, the
    # product issued by each warp group as BLOCK_K / 16 wgmma instructions per 64 rows.
    loop = compiled_tools.instruction_counts(compiled_tools.inner_loop(kernel.ptx))
    warp_groups = config.num_warps // 4
    assert loop["cp.async.bulk.tensor"] == 2
    assert loop["wgmma.mma_async"] == (config.block_k // 16) * config.block_m // 64 // warp_groups
    slots = config.stages * (config.block_m + config.block_n) * config.block_k * 2
    assert slots <= kernel.shared <= compiled_tools.HOPPER.shared_per_program


@pytest.mark.parametrize("config, programs", [("128x256x64 s3 w8", 1), ("128x128x64 s3 w4", 2)])
def test_occupancy_is_set_by_the_slots(kernels, config, programs):
    # 3 slots of 128x64 and 64xBLOCK_N float16 tiles: 144 KiB (one per SM's 228), 96 KiB (two).
    kernel = kernels[f"matmul fp16 {config}"]
    fit = kernel.occupancy()
    assert fit.programs == programs and "shared" in fit.limited_by
    assert kernel.loop() == compiled_tools.inner_loop(kernel.ptx)


def test_copy_kernel_moves_16_bytes_per_access(kernels):
    ptx = kernels["copy fp16"].ptx
    assert "ld.global.v4" in ptx and "st.global.v4" in ptx


def test_module_is_not_imported_by_the_package():
    code = "import sys, triton_guide; print('triton_guide.gluon_matmul' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"


# --- refusals, on any machine ----------------------------------------------------------------


def _cpu(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


@pytest.mark.parametrize("a, b, error, words", [
    pytest.param([[1.0]], _cpu(1, 1), TypeError, "a must be a torch.Tensor", id="a_not_tensor"),
    pytest.param(_cpu(2, 3, 4), _cpu(4, 5), ValueError, "a must be 2-D", id="a_3d"),
    pytest.param(_cpu(3, 4), _cpu(4), ValueError, "b must be 2-D", id="b_1d"),
    pytest.param(_cpu(3, 4, dtype=torch.float32), _cpu(4, 5, dtype=torch.float32), TypeError,
                 "a has dtype torch.float32", id="float32"),
    pytest.param(_cpu(3, 4), _cpu(4, 5, dtype=torch.bfloat16), TypeError, "one dtype",
                 id="mixed_dtypes"),
    pytest.param(_cpu(3, 4), _cpu(5, 6), ValueError, "a's columns (4) must equal b's rows (5)",
                 id="inner_sizes_differ"),
    pytest.param(_cpu(3, 4), _cpu(4, 5), ValueError, "a is on cpu", id="cpu_tensors"),
])
def test_matmul_refuses(a, b, error, words):
    with pytest.raises(error) as raised:
        gm.gluon_matmul(a, b)
    assert words in str(raised.value)


def test_refusal_says_it_needs_sm90():
    with pytest.raises(ValueError, match="only on an sm_90 GPU"):
        gm.gluon_matmul(_cpu(8, 8), _cpu(8, 8))
    with pytest.raises(ValueError, match="x is on cpu.*only on an sm_90 GPU"):
        gm.gluon_copy(_cpu(8))


def test_config_refuses_too_few_rows_for_its_warps():
    with pytest.raises(ValueError, match="block_m=64 with num_warps=8"):
        gm.MatmulConfig(block_m=64, num_warps=8).accumulator_layout()


@pytest.mark.parametrize("make, copied", [
    pytest.param(lambda: _cpu(5, 16), False, id="aligned_rows"),
    pytest.param(lambda: _cpu(5, 13), True, id="odd_width"),
    pytest.param(lambda: _cpu(16, 5).t(), True, id="transposed_view"),
    pytest.param(lambda: _cpu(5, 17)[:, 1:], True, id="misaligned_start"),
])
def test_tma_operand_aligns_rows(make, copied):
    x = make()
    y = gm.tma_operand(x)
    assert (y is not x) == copied
    assert y.stride(1) == 1 and (y.stride(0) * y.element_size()) % 16 == 0
    assert y.data_ptr() % 16 == 0
    assert torch.equal(y, x)


# --- run on an sm_90 GPU -----------------------------------------------------------------------

# (M, N, K): none a multiple of the tile; odd N and K take the launcher's aligned copies.
GPU_SHAPES = [(1031, 517, 2063), (1031, 520, 2056), (1, 8, 8), (2000, 3000, 1000),
              (257, 129, 33)]


@needs_sm90
@pytest.mark.parametrize("config", list(gm.CONFIGS))
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_matmul_matches_float64(dtype, shape, config):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    out = gm.gluon_matmul(a, b, gm.CONFIGS[config])
    assert out.dtype == dtype and out.is_contiguous()
    assert_close(out, a.double() @ b.double(), rtol=tolerance(dtype), name="gluon_matmul")


@needs_sm90
def test_matmul_of_a_transposed_view():
    a = torch.randn(300, 200, device="cuda", dtype=torch.float16)
    b = torch.randn(400, 200, device="cuda", dtype=torch.float16).t()
    assert_close(gm.gluon_matmul(a, b), a.double() @ b.double(),
                 rtol=tolerance(torch.float16), name="gluon_matmul")


@needs_sm90
def test_matmul_with_no_inner_dimension_is_zero():
    a = torch.empty(3, 0, device="cuda", dtype=torch.float16)
    b = torch.empty(0, 5, device="cuda", dtype=torch.float16)
    assert torch.equal(gm.gluon_matmul(a, b), torch.zeros(3, 5, device="cuda",
                                                          dtype=torch.float16))


@needs_sm90
@pytest.mark.parametrize("n", [1, 4095, 4097, (1 << 20) + 3])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32],
                         ids=["fp16", "bf16", "fp32"])
def test_copy_is_exact(dtype, n):
    x = torch.randn(n, device="cuda").to(dtype)
    assert torch.equal(gm.gluon_copy(x), x)
