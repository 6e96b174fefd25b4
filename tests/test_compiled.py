"""triton_guide.compiled: the occupancy arithmetic, the reading of cuobjdump and PTX, the
recording of launches, and compiling a kernel for sm_90 without a GPU."""

from __future__ import annotations

import pytest
import torch
import triton

import triton_guide as tg
from triton_guide import compiled, runtime
from triton_guide.compiled import HOPPER, occupancy

# sm_90 (CUDA C++ Programming Guide, compute capability 9.0): 65536 registers, 2048
# threads, 32 blocks and 228 KiB of shared memory per SM, 227 KiB per block, 1 KiB
# reserved per block; registers given to warps in units of 256.


def test_hopper_limits():
    assert (HOPPER.registers, HOPPER.threads, HOPPER.programs) == (65536, 2048, 32)
    assert (HOPPER.shared, HOPPER.shared_per_program) == (233472, 232448)


@pytest.mark.parametrize("registers, shared, warps, programs, limited_by", [
    # 40 x 32 = 1280 registers a warp (a multiple of 256); 65536 // 1280 = 51 warps -> 12
    # programs of 4 warps; threads allow 2048 // 128 = 16
    (40, 0, 4, 12, ["registers"]),
    # 255 x 32 = 8160, rounded up to 8192 a warp: 8 warps, one program of 8
    (255, 0, 8, 1, ["registers"]),
    # 16 x 32 = 512 a warp: 128 warps by registers, 64 programs of one warp by threads,
    # but at most 32 programs
    (16, 0, 1, 32, ["programs"]),
    # 24 registers: 768 a warp, 85 warps -> 10 programs of 8 warps; threads allow 8
    (24, 0, 8, 8, ["threads"]),
    # 100 KiB + 1 KiB reserved = 103424 bytes a program: 233472 // 103424 = 2
    (32, 100 * 1024, 4, 2, ["shared"]),
    # 1000 bytes round up to 1024, + 1024 reserved: 233472 // 2048 = 114; 32 registers give
    # 64 warps, 16 programs of 4, and threads allow 16 too: a tie
    (32, 1000, 4, 16, ["registers", "threads"]),
])
def test_occupancy_on_known_inputs(registers, shared, warps, programs, limited_by):
    fit = occupancy(registers, shared, warps)
    assert fit.programs == programs
    assert fit.limited_by == limited_by
    assert fit.warps == programs * warps


def test_occupancy_shared_limits_and_refusals():
    assert occupancy(32, 1000, 4).limits["shared"] == 114
    assert occupancy(32, 227 * 1024 + 1, 4).programs == 0  # more than one program may have
    with pytest.raises(ValueError, match="registers"):
        occupancy(0, 0, 4)
    with pytest.raises(ValueError, match="num_warps"):
        occupancy(32, 0, 0)


RES_USAGE = """
Resource usage:
 Common:
  GLOBAL:0
 Function add_kernel:
  REG:26 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:576 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function big_kernel:
  REG:255 STACK:48 SHARED:16 LOCAL:48 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_parse_resource_usage():
    usage = compiled.parse_resource_usage(RES_USAGE)
    assert usage["add_kernel"]["REG"] == 26
    assert usage["big_kernel"] == {"REG": 255, "STACK": 48, "SHARED": 16, "LOCAL": 48,
                                   "CONSTANT": 600, "TEXTURE": 0, "SURFACE": 0, "SAMPLER": 0}


def test_spills_count_local_words_as_triton_does():
    result = compiled.Compiled("k", "sm_90a", 4, 3, 255, 48, 0, {}, "", "")
    assert result.spills == 12  # Triton's n_spills: local memory bytes / 4


SASS = """
        /*0180*/              @!P0 LDG.E.128 R16, desc[UR4][R2.64] ;             /* 0x0000000402108981 */
        /*0190*/                   STL.64 [R1+0x10], R4 ;                        /* 0x0000100401007387 */
        /*01a0*/                   HGMMA.64x256x16.F32 R24, gdesc[UR8], RZ ;     /* 0x00000000081879f0 */
        /*01b0*/              @P1  LDL.LU R5, [R1+0x10] ;                        /* 0x0000100001058983 */
        /*01c0*/                   STL [R1+0x18], R6 ;                           /* 0x0000180601007387 */
"""


def test_sass_opcodes_and_spill_traffic():
    assert compiled.sass_opcodes(SASS) == ["LDG.E.128", "STL.64", "HGMMA.64x256x16.F32",
                                           "LDL.LU", "STL"]
    assert compiled.spill_instructions(SASS) == {"STL": 2, "LDL": 1}


@pytest.mark.parametrize("line, name", [
    ("\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];", "ld.global.v4"),
    ("\t@!%p2 ld.global.b32 { %r1 }, [ %rd1 + 0 ];", "ld.global"),
    ("\tcp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r1], [%rd1];",
     "cp.async.bulk.tensor"),
    ("\twgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%r1}, %rd4, %rd5;", "wgmma.mma_async"),
    ("\tadd.s32 \t%r1, %r2, %r3;", None),
    ("$L__BB0_2:       // =>This Inner Loop Header: Depth=1", None),
    ("\t.reg .b32 \t%r<20>;", None),
])
def test_named_instructions(line, name):
    assert compiled.named(compiled.opcode(line)) == name


PTX_WITH_LOOP = """
\tld.param.u64 \t%rd1, [k_param_0];
$L__BB0_1:                  // =>This Inner Loop Header: Depth=1
\tcp.async.bulk.tensor.2d.shared::cta.global [%r1], [%rd1, {%r2, %r3}], [%r4];
waitLoop:
\tmbarrier.try_wait.parity.shared::cta.b64 complete, [%r62], %r307;
\t@!complete bra.uni waitLoop;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1}, %rd4, %rd5, 1, 1, 0, 1;
\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1}, %rd4, %rd5, 1, 1, 0, 1;
\tadd.s32 \t%r5, %r5, 1;
\tsetp.lt.s32 \t%p1, %r5, %r6;
\t@%p1 bra \t$L__BB0_1;
\tst.global.v4.b32 [ %rd3 + 0 ], { %r9, %r10, %r11, %r12 };
\tret;
"""


def test_inner_loop_skips_waits_and_the_epilogue():
    loop = compiled.inner_loop(PTX_WITH_LOOP)
    counts = compiled.instruction_counts(loop)
    assert counts == {"cp.async.bulk.tensor": 1, "mbarrier.try_wait": 1, "wgmma.mma_async": 2}
    assert compiled.excerpt(loop)[0].startswith("cp.async.bulk.tensor")


def test_a_kernel_without_a_loop_is_read_whole():
    ptx = "\tld.global.b32 {%r1}, [%rd1];\n\tst.global.b32 [%rd2], {%r1};\n\tret;\n"
    assert compiled.inner_loop(ptx) == ptx.splitlines()


def test_record_launches_records_the_launcher_choice():
    x = torch.zeros(5000, device=runtime.device())
    out = tg.vector_add(x, x, block_size=1024)  # runs, then a recorded call does not
    (launch,) = compiled.record_launches(tg.vector_add, x, x, block_size=256)
    assert launch.name == "vector_add_kernel"
    assert launch.kwargs["BLOCK_SIZE"] == 256
    assert launch.args[3] == 5000
    assert out.shape == x.shape


def test_with_config_sets_descriptor_tiles_on_copies():
    a = torch.zeros(256, 256, dtype=torch.float16, device=runtime.device())
    (launch,) = compiled.record_launches(tg.matmul, a, a)
    before = list(launch.args[0].block_shape)
    tuned = launch.with_config(triton.Config(
        dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=8),
        num_stages=3, num_warps=4))
    assert tuned.args[0].block_shape == [128, 32] and tuned.args[1].block_shape == [32, 64]
    assert launch.args[0].block_shape == before
    assert tuned.kwargs["num_warps"] == 4 and tuned.kwargs["BLOCK_SIZE_K"] == 32


def test_vector_add_compiles_for_sm90_without_a_gpu():
    x = torch.zeros(2**20, device=runtime.device())
    (result,) = compiled.compile_for(compiled.record_launches(tg.vector_add, x, x))
    assert result.target == "sm_90a"
    assert result.registers > 0
    assert "ld.global" in result.ptx
    # 16-byte aligned float32 pointers and 2**20 elements: four floats per load
    assert compiled.instruction_counts(result.loop())["ld.global.v4"] > 0
    assert result.occupancy().programs > 0


@pytest.mark.skipif(runtime.interpreting(), reason="needs a CUDA GPU")
def test_cpu_compiled_numbers_match_the_gpu():
    x = torch.zeros(2**20, device=runtime.device())
    (launch,) = compiled.record_launches(tg.vector_add, x, x)
    major, minor = torch.cuda.get_device_capability()
    (ours,) = compiled.compile_for([launch], capability=10 * major + minor)
    gpu = compiled.gpu_compiled(launch)
    assert (gpu["registers"], gpu["spills"], gpu["shared"]) == (
        ours.registers, ours.spills, ours.shared)


def test_loop_summary_names_the_kinds_asked_for():
    result = compiled.Compiled("k", "sm_90a", 4, 3, 32, 0, 0, {}, PTX_WITH_LOOP, "")
    assert compiled.loop_summary(result) == (
        "wgmma.mma_async x2, cp.async.bulk.tensor x1, mbarrier.try_wait x1")
    assert compiled.loop_summary(result, ("wgmma.mma_async",)) == "wgmma.mma_async x2"
