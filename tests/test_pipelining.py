"""The Hopper page's pipelining kernels (triton_guide.pipelining): every combination of knobs
against a float64 reference at odd sizes, the shared-memory arithmetic, and the knobs' errors.

``warp_specialize=True`` compiles only where the Triton version and the GPU support it; on a
GPU where it does not, those cases are skipped with the error's type (under the interpreter
it changes nothing and always runs)."""

import functools

import pytest
import torch
from triton.runtime.errors import OutOfResources

from conftest import FLOAT_DTYPES
from triton_guide import attention_reference, matmul_reference, pipelining
from triton_guide.pipelining import (ATTENTION_TILE, MATMUL_TILE, attention_pipelined,
                                     check_variants, compiler_facts, launch_matmul,
                                     matmul_pipelined, print_outcomes, programs_per_sm,
                                     runnable, short_error, stage_bytes)
from triton_guide.runtime import interpreting
from triton_guide.testing import tolerance

KNOBS = [
    pytest.param(dict(num_stages=1, num_warps=4), id="stages_1"),
    pytest.param(dict(num_stages=3, num_warps=4), id="stages_3"),
    pytest.param(dict(num_stages=4, num_warps=8), id="stages_4_warps_8"),
    pytest.param(dict(num_stages=3, num_warps=4, warp_specialize=True), id="warp_specialized"),
]

# (M, N, K): odd sizes, edges in every direction; a tile of 32 under the interpreter makes
# several programs and K steps without numpy taking long.
TILE = (32, 32, 32) if interpreting() else MATMUL_TILE
SHAPES = [
    pytest.param((1, 1, 1), id="one_by_one"),
    pytest.param((77, 45, 130), id="odd"),
    pytest.param((2 * TILE[0] + 1, TILE[1] - 1, 3 * TILE[2] + 5), id="tail_of_1"),
]


@functools.cache
def warp_specialize_refused() -> str | None:
    return pipelining.warp_specialize_refusal()


def run_or_skip(fn, knobs: dict | None = None):
    """``fn()``, skipping the test where this GPU or Triton cannot compile the knobs. Natively,
    ``warp_specialize=True`` is first tried in a child process with a time limit
    (``warp_specialize_refusal``): on an H100 with Triton 3.6 both kernels compile, and
    their first launch never returns, which would hold a test worker for good."""
    if (knobs or {}).get("warp_specialize") and not interpreting() and warp_specialize_refused():
        pytest.skip(f"warp_specialize: {warp_specialize_refused()}")
    try:
        return fn()
    except (AssertionError, ValueError, TypeError):
        raise
    except Exception as error:  # a compiler's refusal: CompilationError, RuntimeError, ...
        if interpreting():
            raise
        pytest.skip(f"not supported here: {short_error(error)}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("knobs", KNOBS)
def test_matmul_matches_float64(knobs, shape, dtype, device, check):
    m, n, k = shape
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    # float32 tiles take twice the shared memory: smaller ones keep four stages in 227 KiB.
    tile = (64, 64, 32) if dtype == torch.float32 and not interpreting() else TILE
    got = run_or_skip(lambda: matmul_pipelined(a, b, tile=tile, **knobs), knobs)
    check("matmul pipelined", got, matmul_reference(a.double(), b.double()),
          rtol=tolerance(dtype, tensor_cores=True))


def test_matmul_reads_transposed_and_unaligned_inputs(device, check):
    a = torch.randn(70, 37, device=device).t()  # stored by columns
    b = torch.randn(70, 41, device=device)  # rows of 164 bytes: not a multiple of 16
    check("matmul pipelined", matmul_pipelined(a, b, tile=TILE),
          matmul_reference(a.double(), b.double()),
          rtol=tolerance(torch.float32, tensor_cores=True))


# (batch, heads, seq, head_dim)
ATTENTION_SHAPES = [
    pytest.param((1, 1, 1, 16), id="one_key"),
    pytest.param((2, 3, 77, 32), id="odd_seq"),
    pytest.param((1, 2, 2 * ATTENTION_TILE[0] + 1, 64), id="tail_of_1"),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("shape", ATTENTION_SHAPES)
@pytest.mark.parametrize("knobs", KNOBS)
def test_attention_matches_float64(knobs, shape, dtype, device, check):
    q, k, v = (torch.randn(shape, device=device, dtype=dtype) for _ in range(3))
    got = run_or_skip(lambda: attention_pipelined(q, k, v, **knobs), knobs)
    expected = attention_reference(q.double(), k.double(), v.double())
    check("attention pipelined", got, expected, rtol=tolerance(dtype, tensor_cores=True))


def test_attention_scale_is_used(device, check):
    q, k, v = (torch.randn(1, 2, 40, 32, device=device) for _ in range(3))
    expected = attention_reference(q.double(), k.double(), v.double(), sm_scale=0.7)
    check("attention pipelined", attention_pipelined(q, k, v, sm_scale=0.7), expected,
          rtol=tolerance(torch.float32, tensor_cores=True))


def test_stage_arithmetic():
    # 128 x 64 and 64 x 128 float16 tiles: 32 KiB a stage; 7 fit 227 KiB, 8 do not.
    per_stage = stage_bytes([(128, 64), (64, 128)], 2)
    assert per_stage == 32 * 1024
    assert programs_per_sm(3 * per_stage, 228 * 1024, 227 * 1024) == 2
    assert programs_per_sm(7 * per_stage, 228 * 1024, 227 * 1024) == 1
    assert programs_per_sm(8 * per_stage, 228 * 1024, 227 * 1024) == 0


@pytest.mark.skipif(interpreting(), reason="the interpreter compiles nothing")
def test_compiler_facts_grow_with_stages(device):
    a = torch.randn(256, 512, device=device, dtype=torch.float16)
    b = torch.randn(512, 256, device=device, dtype=torch.float16)
    shared = [compiler_facts(launch_matmul(a, b, num_stages=s)[1])["shared_bytes"]
              for s in (2, 4)]
    assert shared[1] >= shared[0] + 2 * stage_bytes([(128, 64), (64, 128)], 2)


@pytest.mark.skipif(interpreting(), reason="the interpreter has no shared memory to run out of")
def test_too_many_stages_run_out_of_shared_memory(device):
    a = torch.randn(256, 512, device=device, dtype=torch.float16)
    b = torch.randn(512, 256, device=device, dtype=torch.float16)
    with pytest.raises(OutOfResources):
        matmul_pipelined(a, b, num_stages=12)


def test_compiler_facts_under_the_interpreter_are_none():
    assert compiler_facts(None) is None


@pytest.mark.parametrize("knobs, error, words", [
    pytest.param(dict(num_stages=0), ValueError, "num_stages must be at least 1", id="stages_0"),
    pytest.param(dict(num_stages=2.0), TypeError, "num_stages must be an int", id="stages_float"),
    pytest.param(dict(num_warps=3), ValueError, "num_warps must be one of", id="warps_3"),
    pytest.param(dict(warp_specialize="yes"), TypeError, "warp_specialize", id="ws_string"),
    pytest.param(dict(tile=(128, 100, 64)), ValueError, "powers of two", id="tile_100"),
    pytest.param(dict(tile=(128, 128)), TypeError, "tuple of 3 ints", id="tile_short"),
])
def test_matmul_knobs_are_checked(knobs, error, words, device):
    a = torch.randn(8, 8, device=device)
    with pytest.raises(error, match=words):
        matmul_pipelined(a, a, **knobs)


def test_attention_refuses_other_head_dims_and_shapes(device):
    q = torch.randn(1, 1, 8, 48, device=device)
    with pytest.raises(ValueError, match="head_dim"):
        attention_pipelined(q, q, q)
    k = torch.randn(1, 1, 9, 48, device=device)
    with pytest.raises(ValueError, match="one shape"):
        attention_pipelined(q, k, k)


def test_short_error_leaves_out_paths():
    assert short_error(RuntimeError("PassManager::run failed")) == (
        "RuntimeError: PassManager::run failed")
    assert short_error(RuntimeError("/home/x/kernel.py:12: bad")) == "RuntimeError"


def test_check_variants_reports_each_launch(device, capsys):
    a = torch.randn(40, 33, device=device, dtype=torch.float16)
    b = torch.randn(33, 20, device=device, dtype=torch.float16)
    variants = {"4 warps": dict(num_warps=4, tile=TILE), "8 warps": dict(num_warps=8, tile=TILE)}
    outcomes = run_or_skip(lambda: check_variants(
        launch_matmul, (a, b), matmul_reference(a.double(), b.double()),
        tolerance(torch.float16, tensor_cores=True), variants, [1, 2]))
    assert {name: sorted(row) for name, row in outcomes.items()} == {
        "4 warps": [1, 2], "8 warps": [1, 2]}
    assert all(outcome["error"] < tolerance(torch.float16, tensor_cores=True)
               for row in outcomes.values() for outcome in row.values())
    print_outcomes(outcomes)
    assert "4 launches matched float64" in capsys.readouterr().out


def test_check_variants_raises_on_a_wrong_result(device):
    a = torch.randn(40, 33, device=device)
    b = torch.randn(33, 20, device=device)
    with pytest.raises(AssertionError, match="4 warps, 1 stages"):
        check_variants(launch_matmul, (a, b), matmul_reference(a.double(), b.double()) + 1,
                       1e-3, {"4 warps": dict(num_warps=4, tile=TILE)}, [1])


def test_runnable_leaves_out_variants_that_failed_anywhere():
    outcomes = {"fine": {1: {"error": 1e-4}, 2: {"error": 1e-4}},
                "refused at 2": {1: {"error": 1e-4}, 2: {"failure": "OutOfResources"}}}
    assert runnable(outcomes) == ["fine"]


@pytest.mark.skipif(not interpreting(), reason="the interpreter's case")
def test_warp_specialize_is_not_tried_under_the_interpreter():
    assert pipelining.warp_specialize_refusal(timeout_s=0.01) is None


@pytest.mark.parametrize("probe, expected", [
    ("", None),
    ("raise RuntimeError('no partitions for this loop')",
     "RuntimeError: no partitions for this loop"),
    ("raise ValueError('see /tmp/x.py')", "ValueError"),
    ("import os; os.abort()", "the process compiling and running a first launch died (status -6)"),
    ("import time; time.sleep(30)", "compiling did not finish within 2 s"),
    ("import time; print('compiled a'); print('compiled b', flush=True); time.sleep(30)",
     "both kernels compiled, but a first launch did not finish within 2 s"),
])
def test_warp_specialize_refusal_says_why_in_a_few_words(monkeypatch, probe, expected):
    # The child process runs whatever the probe is: here, stand-ins for a launch that
    # works, raises, crashes and hangs.
    monkeypatch.setattr(pipelining, "interpreting", lambda: False)
    monkeypatch.setattr(pipelining, "_WARP_SPECIALIZE_PROBE", probe)
    assert pipelining.warp_specialize_refusal(timeout_s=2) == expected
