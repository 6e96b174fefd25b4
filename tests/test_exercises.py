"""The exercises: solutions pass, stubs fail, each plausible mistake fails the case meant to
catch it (saying what it is meant to say), and the command line reports and exits
accordingly."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from triton_guide import runtime
from triton_guide.exercises import NAMES, check, check_file, check_mistake, checker, get
from triton_guide.exercises.__main__ import FAILED, PASSED, USAGE, main
from triton_guide.exercises.watch import to_tf32

ROOT = Path(__file__).resolve().parents[1]
MISTAKES = [
    pytest.param(name, mistake, id=f"{name}-{mistake.name}")
    for name in NAMES for mistake in get(name).mistakes
]
# Every exercise runs these; the 2-D ones also run non_contiguous.
STANDARD_CASES = {"n=1", "tail_of_1", "non_power_of_two", "all_negative", "large_values"}


def _failed_in_report(report_text: str, case_name: str) -> bool:
    return re.search(rf"^\s+FAIL\s+{re.escape(case_name)}\s", report_text, re.M) is not None


def _said_about(report, case_name: str) -> str:
    """The summary and details of one case of ``report``."""
    result = next(result for result in report.results if result.case.name == case_name)
    return "\n".join([result.summary, *result.details])


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes(name, seed):
    exercise = get(name)
    report = check_file(exercise, exercise.solution_path, seed=seed)
    assert report.passed, report.text()


@pytest.mark.parametrize("name", NAMES)
def test_stub_fails_and_names_a_case(name, seed):
    exercise = get(name)
    report = check_file(exercise, exercise.stub_path, seed=seed)
    first = exercise.cases(torch.Generator().manual_seed(seed))[0].name
    assert f"first failing case: {first}" in report.text(), report.text()


@pytest.mark.parametrize("name, mistake", MISTAKES)
def test_mistake_fails_the_case_meant_to_catch_it(name, mistake, seed):
    if mistake.needs_interpreter and not runtime.interpreting():
        pytest.skip("only the interpreter catches this mistake (Mistake.needs_interpreter)")
    report = check_mistake(get(name), mistake, seed=seed, only=mistake.caught_by)
    assert _failed_in_report(report.text(), mistake.caught_by), report.text()
    if runtime.interpreting():  # the words of a report differ on a GPU, which sees less
        assert mistake.reported in _said_about(report, mistake.caught_by), report.text()


@pytest.mark.parametrize("name", NAMES)
def test_cases_include_the_standard_edges(name, seed):
    names = {case.name for case in get(name).cases(torch.Generator().manual_seed(seed))}
    assert STANDARD_CASES <= names, f"missing: {STANDARD_CASES - names}"


def test_every_exercise_has_a_mistake_to_catch():
    assert all(get(name).mistakes for name in NAMES)


def test_report_shows_first_wrong_position_with_values(seed):
    def solve(x, out, n):  # right everywhere except the last element
        out.copy_(x.clamp(min=0))
        out[n - 1] = 12.5 if x[n - 1] < 0 else -12.5

    text = check(get("relu"), solve, seed=seed).text()
    assert re.search(r"first failing case: n=1 .*\n.*\n.*\n\s+out\[0\]: expected \S+, got "
                     r"-?12\.5", text), text


def test_report_counts_elements_never_written(seed):
    def solve(x, out, n):  # forgets the second half
        out[: n // 2] = x[: n // 2].clamp(min=0)

    report = check(get("relu"), solve, seed=seed)
    tail = next(result for result in report.results if result.case.name == "tail_of_1")
    assert tail.summary == "513 of 1025 elements of out wrong (513 still hold the checker's NaN)"


def test_report_catches_writing_into_an_input(seed):
    def solve(x, out, n):
        out.copy_(x.clamp_(min=0))

    report = check(get("relu"), solve, seed=seed)
    negative = next(result for result in report.results if result.case.name == "all_negative")
    assert negative.summary == "changed the input x"


def test_solve_without_a_kernel_fails(seed):
    def solve(x, out, n):  # the right sum, from PyTorch
        out.copy_(x.sum().reshape(1))

    report = check(get("atomic_sum"), solve, seed=seed)
    assert _said_about(report, "n=1").startswith("launched no Triton kernel"), report.text()


TWO_PASS_LOGSUMEXP = """
import triton
import triton.language as tl


@triton.jit
def two_pass_kernel(x_ptr, out_ptr, N, stride_row, stride_col, BLOCK_SIZE: tl.constexpr):
    row_start = x_ptr + tl.program_id(0) * stride_row
    lane_max = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    for start in range(0, N, BLOCK_SIZE):  # first pass: the maximum
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_start + cols * stride_col, mask=cols < N, other=-float("inf"))
        lane_max = tl.maximum(lane_max, x)
    row_max = tl.max(lane_max, axis=0)
    shift = tl.where(row_max == -float("inf"), 0.0, row_max)
    lane_sum = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, N, BLOCK_SIZE):  # second pass: the sum
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_start + cols * stride_col, mask=cols < N, other=-float("inf"))
        lane_sum += tl.exp(x - shift)
    tl.store(out_ptr + tl.program_id(0), shift + tl.log(tl.sum(lane_sum, axis=0)))


def solve(x, out, M, N):
    two_pass_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK_SIZE=1024)
"""


@pytest.mark.skipif(not runtime.interpreting(),
                    reason="only the interpreter sees every address, so only it counts reads")
def test_two_passes_over_a_row_fail_online_logsumexp(tmp_path, seed):
    path = tmp_path / "two_pass.py"
    path.write_text(TWO_PASS_LOGSUMEXP)
    report = check_file(get("online_logsumexp"), path, seed=seed)
    assert _said_about(report, "n=1").startswith("read x more than once"), report.text()


def check_edited_solution(name, edits, tmp_path, seed, only=None):
    """The checker's report on exercise ``name``'s solution with each ``(old, new)`` of
    ``edits`` made once (each ``old`` must occur exactly once): for a mistake that one
    replacement, as a :class:`Mistake` makes, cannot express. ``only``: one case."""
    exercise = get(name)
    source = exercise.solution_path.read_text()
    for old, new in edits:
        assert source.count(old) == 1, (old, source)
        source = source.replace(old, new)
    path = tmp_path / f"edited_{name}.py"
    path.write_text(source)
    return check_file(exercise, path, seed=seed, only=only)


RELU_LAUNCH = "    relu_kernel[grid](x, out, n, BLOCK_SIZE=BLOCK_SIZE)\n"


def test_an_output_computed_by_torch_fails(tmp_path, seed):
    # The kernel runs and reads x, but stores nothing; solve writes the answer with torch.
    report = check_edited_solution("relu", [
        ("    tl.store(out_ptr + offsets, tl.maximum(x, 0.0), mask=mask)\n", "    pass\n"),
        (RELU_LAUNCH, RELU_LAUNCH + "    out.copy_(x.clamp(min=0))\n")], tmp_path, seed)
    said = _said_about(report, "n=1")
    assert said.startswith("computed from x with PyTorch (clamp)"), report.text()
    assert "calls clamp on x at line 21 of your file" in said, said


def test_a_kernel_fed_by_torch_work_on_an_input_fails(tmp_path, seed):
    # The kernel adds a product that solve computed with torch: right values, and the
    # kernel never reads x itself (seen in the interpreter); the call is seen on a GPU too.
    report = check_edited_solution("scaled_add", [
        ("scaled_add_kernel[grid](x, y, out, alpha, n,",
         "scaled_add_kernel[grid](alpha * x, y, out, 1.0, n,")], tmp_path, seed)
    said = _said_about(report, "n=1")
    assert said.startswith("computed from x with PyTorch"), report.text()


def test_a_scratch_tensor_made_without_a_device_fails(tmp_path, seed):
    # atomic_sum through a float32 scratch total made with torch.zeros(1): on the CPU, so
    # the interpreter runs it and a GPU cannot.
    report = check_edited_solution("atomic_sum", [
        ("    out.zero_()\n", "    total = torch.zeros(1)\n"),
        ("(x, out, n,", "(x, total, n,"),
        ("BLOCK_SIZE=BLOCK_SIZE)\n", "BLOCK_SIZE=BLOCK_SIZE)\n    out.copy_(total)\n")],
        tmp_path, seed)
    assert not report.passed, report.text()
    said = _said_about(report, "n=1")
    if runtime.interpreting():
        assert said.startswith("passed a kernel a tensor made without device= (zeros)"), said
        assert "torch.zeros(...) at line" in said
    else:  # the launch itself fails
        assert "cpu tensor" in said.lower() or "cannot be accessed" in said, said

def test_a_scratch_tensor_moved_to_the_inputs_device_passes(tmp_path):
    # The spin lock below, its lock made on the CPU and then moved where x is.
    path = tmp_path / "moved_lock.py"
    path.write_text(SPIN_LOCK.replace("torch.zeros(1, dtype=torch.int32, device=x.device)",
                                      "torch.zeros(1, dtype=torch.int32).to(x.device)"))
    assert "to(x.device)" in path.read_text()
    report = check_file(get("atomic_sum"), path, seed=0)
    assert report.passed, report.text()


def test_a_conversion_of_an_input_is_torch_work(tmp_path, seed):
    report = check_edited_solution("relu", [
        ("relu_kernel[grid](x, out,", "relu_kernel[grid](x.to(torch.float64).float(), out,")],
        tmp_path, seed)
    assert _said_about(report, "n=1").startswith("computed from x with PyTorch (to)"), \
        report.text()

def test_one_block_for_the_whole_vector_fails_at_the_largest_size(tmp_path, seed):
    # One program with a block of next_power_of_2(n) lanes: right at every case up to
    # 100003 elements (131072 lanes), but at n = 10**7 the block would hold 2**24
    # elements, past Triton's 2**20.
    report = check_edited_solution("scaled_add", [
        ("    grid = (triton.cdiv(n, BLOCK_SIZE),)\n", "    grid = (1,)\n"),
        ("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=triton.next_power_of_2(n))")], tmp_path, seed)
    assert [r.case.name for r in report.results if not r.passed] == ["largest"], report.text()
    said = _said_about(report, "largest")
    assert said.startswith("scaled_add_kernel takes a block of 16777216 at this size"), said


def test_a_grid_past_65535_on_axis_1_fails_at_the_largest_size(tmp_path, seed):
    # One program per row on axis 1: fine up to 65535 rows, and the statement allows 10**5.
    report = check_edited_solution("row_sum", [
        ("    row = tl.program_id(0)\n", "    row = tl.program_id(1)\n"),
        ("row_sum_kernel[(M,)]", "row_sum_kernel[(1, M)]")], tmp_path, seed)
    assert [r.case.name for r in report.results if not r.passed] == ["most_rows"], report.text()
    assert _said_about(report, "most_rows").startswith("grid (1, 100000) too large for a GPU")


def test_a_block_as_long_as_the_row_fails_at_the_largest_size(tmp_path, seed):
    # BLOCK_SIZE = next_power_of_2(N) passes every case (rows of up to 40000: 65536 lanes);
    # at N = 10**6 it is 2**20, which Triton would spend minutes compiling.
    report = check_edited_solution("row_sum", [
        ("block_size = min(1024, triton.next_power_of_2(N))",
         "block_size = triton.next_power_of_2(N)")], tmp_path, seed)
    failed = [r.case.name for r in report.results if not r.passed]
    assert failed == ["longest_rows"], report.text()
    assert _said_about(report, "longest_rows").startswith(
        "row_sum_kernel takes a block of 1048576 at this size"), report.text()

def test_a_solve_that_reads_data_is_not_tried_at_the_largest_size(tmp_path, seed):
    # Reading the output back (out.sum().item()) needs data, which meta tensors lack.
    report = check_edited_solution("relu", [
        (RELU_LAUNCH, RELU_LAUNCH + "    out.sum().item()\n")], tmp_path, seed)
    assert report.passed, report.text()
    assert "(not tried: solve needs the data" in _said_about(report, "largest")

def test_pytorch_calls_on_inputs_that_only_read_metadata_pass(tmp_path, seed):
    # Shapes, strides, views and allocations like an input are solve's to use.
    report = check_edited_solution("row_sum", [(
        "def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):\n",
        "def solve(x: torch.Tensor, out: torch.Tensor, M: int, N: int):\n"
        "    assert x.shape == (M, N) and x.dim() == 2 and x.numel() == M * N\n"
        "    x.stride(0), x.T, x[:1], torch.empty_like(x), x.view_as(x)\n"
        "    x.expand_as(x), x.movedim(0, 1), torch.broadcast_to(x, x.shape), x.select(0, 0)\n"
        "    x = x.float().to(x.device)\n")], tmp_path, seed)
    assert report.passed, report.text()


def test_an_output_changed_by_torch_after_the_kernel_fails(tmp_path, seed):
    # The kernel stores x itself; solve then applies the ReLU with torch.
    report = check_edited_solution("relu", [
        ("tl.maximum(x, 0.0), mask=mask)", "x, mask=mask)"),
        (RELU_LAUNCH, RELU_LAUNCH + "    out.relu_()\n")], tmp_path, seed)
    if runtime.interpreting():
        assert "changed out after a kernel stored it" in report.text(), report.text()
        assert not report.passed
    else:  # on a GPU the checker cannot see what a kernel stored
        assert report.passed, report.text()


def test_a_size_taken_as_constexpr_under_another_name_fails(tmp_path, seed):
    # The row length reaches the kernel as n_cols: tl.constexpr, then is used as N.
    report = check_edited_solution("softmax_rows", [
        ("def softmax_kernel(x_ptr, out_ptr, N, ",
         "def softmax_kernel(x_ptr, out_ptr, n_cols: tl.constexpr, "),
        ("    row = tl.program_id(0)\n", "    N = n_cols\n    row = tl.program_id(0)\n")],
        tmp_path, seed)
    assert _said_about(report, "tail_of_1").startswith(
        "took the size n_cols as tl.constexpr"), report.text()


ONE_ID_PER_TILE = (
    "    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
    "    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n",
    "    col_blocks = tl.cdiv(N, BLOCK_N)\n"
    "    rows = (tl.program_id(0) // col_blocks) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
    "    cols = (tl.program_id(0) % col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)\n")
TILES = "triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)"


# Right values from one program per tile, each finding its tile by dividing one id.
@pytest.mark.parametrize("grid, case, said", [
    pytest.param(f"({TILES},)", "n=1", "launched a 1-D grid", id="1-D"),
    pytest.param(f"lambda meta: ({TILES},)", "n=1", "launched a 1-D grid", id="callable_1-D"),
    pytest.param(f"({TILES}, 1)", "wide", "launched one column of tiles", id="T_by_1"),
    pytest.param(f"({TILES}, 1, 1)", "wide", "launched one column of tiles", id="T_by_1_by_1"),
])
def test_a_grid_of_fewer_dimensions_than_asked_fails(grid, case, said, tmp_path, seed):
    report = check_edited_solution("outer_product", [
        ONE_ID_PER_TILE,
        ("grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))", f"grid = {grid}")],
        tmp_path, seed)
    assert _said_about(report, case).startswith(said), report.text()
    assert "asks for a 2-D grid of tiles" in report.text()


def _tiled_matmul_taking_num_programs(tmp_path):
    """The tiled_matmul exercise's solution, its solve taking (and ignoring) num_programs:
    the right product, from one program per tile on a 2-D grid."""
    source = get("tiled_matmul").solution_path.read_text()
    old = "M: int, N: int, K: int):"
    assert source.count(old) == 1, source
    path = tmp_path / "tile_per_program.py"
    path.write_text(source.replace(old, "M: int, N: int, K: int, num_programs: int):"))
    return path


@pytest.mark.parametrize("watched", [True, False], ids=["interpreter", "gpu_view"])
def test_one_program_per_tile_fails_persistent_matmul(watched, monkeypatch, tmp_path, seed):
    # gpu_view: what a GPU run sees, no addresses (and so no owner of each tile).
    monkeypatch.setattr(checker, "WATCH_MEMORY", watched and checker.WATCH_MEMORY)
    report = check_file(get("persistent_matmul"), _tiled_matmul_taking_num_programs(tmp_path),
                        seed=seed)
    # n=1 has one tile: a grid of one program is min(num_programs, tiles), and passes.
    assert report.first_failure.case.name == "tail_of_1", report.text()
    said = _said_about(report, "tail_of_1")
    assert said.startswith("launched one program per tile, grid (3, 3), not (3,)"), said
    assert "A persistent kernel launches a 1-D grid of num_programs programs" in said


PERSISTENT_TILES = "triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)"


@pytest.mark.parametrize("grid, said", [
    pytest.param(f"(min(num_programs, {PERSISTENT_TILES}),)", None, id="min_of_both"),
    pytest.param("(max(1, num_programs - 1),)", "launched the grid (2,), not (3,)",
                 id="one_fewer"),
    pytest.param("(num_programs, 1)", None, id="trailing_1"),
    pytest.param("(num_programs, 2)", "launched the grid (3, 2), not (3,)", id="2-D"),
])
def test_persistent_matmul_takes_only_its_grid(grid, said, tmp_path, seed):
    report = check_edited_solution("persistent_matmul", [
        ("grid = (num_programs,)", f"grid = {grid}")], tmp_path, seed,
        only=None if said is None else "n=1")
    if said is None:
        assert report.passed, report.text()
    else:
        assert _said_about(report, "n=1").startswith(said), report.text()


@pytest.mark.parametrize("rows, columns, group", [(9, 9, 3), (5, 7, 2), (4, 3, 8), (1, 6, 4),
                                                  (6, 1, 4), (7, 5, 1)])
def test_persistent_matmul_tile_numbers_invert_the_lessons_grouped_order(rows, columns,
                                                                         group):
    from triton_guide.exercises.persistent_matmul import tile_numbers
    from triton_guide.matmul_steps import program_tiles

    numbers = tile_numbers(rows, columns, 1, 1, group)
    tiles = program_tiles(rows, columns, group).numpy()  # the lesson's kernel: (row, column)
    assert (numbers[tiles[:, 0], tiles[:, 1]] == np.arange(rows * columns)).all()


FIRST_BLOCK_SHIFT = '''\
import triton
import triton.language as tl


@triton.jit
def logsumexp_kernel(x_ptr, out_ptr, N, stride_row, stride_col, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    total = tl.zeros([BLOCK_SIZE], tl.float32)
    shift = -float("inf")
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < N,
                    other=-float("inf"))
        shift = tl.where(shift == -float("inf"), tl.max(x, axis=0), shift)
        total += tl.exp(x - tl.where(shift == -float("inf"), 0.0, shift))
    shift = tl.where(shift == -float("inf"), 0.0, shift)
    tl.store(out_ptr + row, tl.log(tl.sum(total, axis=0)) + shift)


def solve(x, out, M, N):
    logsumexp_kernel[(M,)](x, out, N, x.stride(0), x.stride(1), BLOCK_SIZE=1024)
'''


def test_a_shift_fixed_by_the_first_block_fails_online_logsumexp(tmp_path, seed):
    # One pass, finite everywhere on rows of small values; never rescaled, the sum
    # overflows once the row climbs far above its first block's maximum.
    path = tmp_path / "first_block_shift.py"
    path.write_text(FIRST_BLOCK_SHIFT)
    report = check_file(get("online_logsumexp"), path, seed=seed)
    assert report.failed_cases == ["ascending_across_the_range"], report.text()


FLOAT16_ACCUMULATOR = [
    ("accumulator = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
     "accumulator = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float16)"),
    ("accumulator = tl.dot(a, b, accumulator)", "accumulator += tl.dot(a, b)")]


def test_a_kernel_the_gpu_compiler_refuses_fails(tmp_path, seed):
    # tl.dot returns float32: the float16 accumulator changes type in the loop. The
    # interpreter runs it (and promotes); a GPU's compiler refuses it.
    report = check_edited_solution("tiled_matmul", FLOAT16_ACCUMULATOR, tmp_path, seed)
    assert not report.passed, report.text()
    said = _said_about(report, "n=1")
    if runtime.interpreting():
        assert said.startswith("matmul_kernel runs in the interpreter but does not compile "
                               "for a GPU"), report.text()
        assert "Loop-carried variable accumulator" in said and "create it with the type" in said
    else:  # the launch itself compiles, and fails
        assert "Loop-carried variable accumulator" in said, report.text()


def test_a_dot_on_tiles_too_small_for_the_gpu_fails(tmp_path, seed):
    report = check_edited_solution("tiled_matmul", [("BLOCK_K = 32\n", "BLOCK_K = 4\n")],
                                   tmp_path, seed)
    assert not report.passed, report.text()
    said = _said_about(report, "n=1")
    assert "Input shapes should have" in said, report.text()
    if runtime.interpreting():
        assert "smallest tile, named in the message above" in said



def test_tiles_past_the_gpus_shared_memory_fail(tmp_path, seed):
    # 128 x 64 and 64 x 128 float32 tiles are 64 KiB a stage; four stages need more
    # shared memory than an H100 has. The interpreter has no such limit.
    report = check_edited_solution("tiled_matmul", [
        ("BLOCK_M = 32\n", "BLOCK_M = 128\n"), ("BLOCK_N = 32\n", "BLOCK_N = 128\n"),
        ("BLOCK_K = 32\n", "BLOCK_K = 64\n"),
        ("BLOCK_K=BLOCK_K)", "BLOCK_K=BLOCK_K, num_stages=4)")], tmp_path, seed)
    assert not report.passed, report.text()
    if runtime.interpreting():
        said = _said_about(report, "n=1")
        assert said.startswith("matmul_kernel compiles but cannot launch on a GPU"), said
        assert "KiB of shared memory a program, with num_stages=4" in said
    else:  # a launch with K = 1 compiles a loop of one step, which fits: a longer K fails
        said = _said_about(report, "deep")
        assert "out of resource" in said.lower(), said


def test_more_warps_than_a_gpu_runs_fail(tmp_path, seed):
    report = check_edited_solution("scaled_add", [
        ("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=64)")], tmp_path, seed)
    assert not report.passed, report.text()
    if runtime.interpreting():
        said = _said_about(report, "n=1")
        assert "num_warps=64 is 2048 threads a program" in said, said


@pytest.mark.skipif(not runtime.interpreting(), reason="the check of the compiled kernel")
def test_a_number_of_warps_not_a_power_of_two_fails(tmp_path, seed):
    report = check_edited_solution("scaled_add", [
        ("BLOCK_SIZE=BLOCK_SIZE)", "BLOCK_SIZE=BLOCK_SIZE, num_warps=6)")], tmp_path, seed)
    said = _said_about(report, "n=1")
    assert "num_warps must be a power of 2" in said and "1, 2, 4, 8, 16 or 32" in said, said

@pytest.mark.skipif(not runtime.interpreting(), reason="a GPU compiles every launch itself")
def test_a_kernel_that_cannot_be_compiled_here_is_noted_not_failed(tmp_path, seed):
    # The file turns the interpreter on before its kernel is defined: imported again to
    # compile, it has no GPU kernel to give, which says nothing about the kernel.
    report = check_edited_solution("tiled_matmul", [
        ("import torch\n", "import os\nos.environ['TRITON_INTERPRET'] = '1'\nimport torch\n")],
        tmp_path, seed)
    assert report.passed, report.text()
    assert "not compiled for a GPU:" in report.text() and "has no @triton.jit function " \
        "matmul_kernel" in report.text()


# A GPU's arithmetic does not keep a NaN's payload bits, so there the checker cannot tell
# the margins' NaN from others and says so in more general words (seen on an H100).
@pytest.mark.parametrize("name, mistake, caught_by, said, said_on_gpu", [
    pytest.param("column_max", "load_without_mask", "n=1", "3e+38", "3e+38",
                 id="max_hides_nan"),
    pytest.param("matvec", "x_load_without_mask", "n=1", "The NaN around an input",
                 "computed from an input's margin or gaps", id="nan_from_a_margin"),
])
def test_without_the_watch_margins_still_catch(monkeypatch, name, mistake, caught_by, said,
                                               said_on_gpu, seed):
    # What a GPU run sees: no addresses, only what lands in memory.
    monkeypatch.setattr(checker, "WATCH_MEMORY", False)
    said = said if runtime.interpreting() else said_on_gpu
    exercise = get(name)
    wrong = next(m for m in exercise.mistakes if m.name == mistake)
    report = check_mistake(exercise, wrong, seed=seed, only=caught_by)
    assert said in _said_about(report, caught_by), report.text()


def test_same_seed_same_inputs(seed):
    exercise = get("online_logsumexp")
    first = exercise.cases(torch.Generator().manual_seed(seed))
    second = exercise.cases(torch.Generator().manual_seed(seed))
    assert all(torch.equal(a.arguments["x"].nan_to_num(), b.arguments["x"].nan_to_num())
               and a.arguments["N"] == b.arguments["N"] for a, b in zip(first, second))


def _run_cli(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triton_guide.exercises", *arguments],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_cli_list_prints_the_names_in_order():
    result = _run_cli("list")
    listed = [line.split()[0] for line in result.stdout.splitlines()]
    assert len(listed) >= 10 and listed == NAMES, result.stdout + result.stderr


def test_cli_check_solution_exits_0():
    solution = get("column_max").solution_path
    result = _run_cli("check", "column_max", str(solution))
    assert result.returncode == PASSED, result.stdout + result.stderr


def test_cli_check_stub_exits_nonzero_and_names_a_case():
    stub = get("softmax_rows").stub_path
    result = _run_cli("check", "softmax_rows", str(stub))
    assert result.returncode == FAILED and "first failing case: n=1" in result.stdout, (
        result.stdout + result.stderr)


def test_cli_prints_each_case_as_it_finishes(tmp_path):
    # A solve that kills the process in the second case: the first case's line is out.
    path = tmp_path / "dies.py"
    path.write_text(get("relu").solution_path.read_text() + (
        "\n\nsolve_right = solve\n\n\ndef solve(x, out, n):\n"
        "    import os\n    if n > 1:\n        os._exit(134)\n    solve_right(x, out, n)\n"))
    result = _run_cli("check", "relu", str(path))
    assert result.returncode == 134 and re.search(r"PASS\s+n=1\s", result.stdout), (
        result.stdout + result.stderr)


def test_cli_unknown_name(capsys):
    status = main(["check", "no_such_exercise", str(get("relu").solution_path)])
    assert status == USAGE and "no exercise named 'no_such_exercise'" in capsys.readouterr().err


def test_cli_unknown_case(capsys):
    status = main(["check", "relu", str(get("relu").solution_path), "--case", "n=0"])
    assert status == USAGE and "relu has no case named 'n=0'" in capsys.readouterr().err


def test_cli_missing_file(capsys, tmp_path):
    status = main(["check", "relu", str(tmp_path / "absent.py")])
    assert status == USAGE and "no file at" in capsys.readouterr().err


def test_cli_file_without_solve(capsys, tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("def solver(x, out, n):\n    pass\n")
    status = main(["check", "relu", str(path)])
    assert status == USAGE and "defines no function named solve" in capsys.readouterr().err


def test_cli_exception_in_solve(capsys, tmp_path):
    path = tmp_path / "raises.py"
    path.write_text("def solve(x, out, n):\n    raise RuntimeError('boom')\n")
    status = main(["check", "relu", str(path)])
    output = capsys.readouterr().out
    assert status == FAILED and "solve raised RuntimeError: boom" in output, output


def test_cli_prints_stub_and_solution(capsys):
    main(["stub", "relu"])
    stub = capsys.readouterr().out
    main(["solution", "relu"])
    solution = capsys.readouterr().out
    assert stub == get("relu").stub_path.read_text() and "tl.store" in solution


def test_a_lost_cuda_context_stops_the_check():
    # After an illegal address the GPU refuses every later launch of the process: the
    # checker stops at the first case and says why, instead of failing every case alike.
    calls = []

    def solve(x, y, out, alpha, n):
        calls.append(n)
        raise RuntimeError("CUDA error: an illegal memory access was encountered\n"
                           "CUDA kernel errors might be asynchronously reported")

    report = check(get("scaled_add"), solve, seed=0)
    assert len(calls) == 1 and len(report.results) == 1, report.text()
    assert "CUDA error: an illegal memory access" in report.results[0].summary
    assert "were not run" in report.text() and not report.passed


def test_another_error_does_not_stop_the_check():
    def solve(x, y, out, alpha, n):
        raise RuntimeError("something else went wrong")

    report = check(get("scaled_add"), solve, seed=0)
    assert len(report.results) == len(get("scaled_add").cases(torch.Generator())), report.text()
    assert "were not run" not in report.text()
    assert "1 dry case at the statement's largest sizes did not run" in report.text()


OVERLAPPING_LAST_BLOCK = '''
import triton
import triton.language as tl


@triton.jit
def shifted_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    # No mask: the last block starts early enough to end at n, so it stores some
    # elements that the block before it stores too, with the same values.
    start = tl.minimum(tl.program_id(0) * BLOCK, n - BLOCK)
    offsets = start + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, alpha * x + y)


@triton.jit
def masked_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


def solve(x, y, out, alpha, n):
    if n < 128:
        masked_kernel[(1,)](x, y, out, alpha, n, BLOCK=128)
    else:
        shifted_kernel[(triton.cdiv(n, 128),)](x, y, out, alpha, n, BLOCK=128)
'''


def test_programs_storing_the_same_values_is_no_race(tmp_path):
    # Two programs write some elements of out, with equal values: a wasted store, not a
    # race, so the checker must pass this correct solution.
    path = tmp_path / "overlapping.py"
    path.write_text(OVERLAPPING_LAST_BLOCK)
    report = check_file(get("scaled_add"), path, seed=0)
    assert report.passed, report.text()


SPIN_LOCK = '''
import torch
import triton
import triton.language as tl


@triton.jit
def locked_sum_kernel(x_ptr, out_ptr, lock_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:  # one program at a time past this line
        pass
    tl.store(out_ptr, tl.load(out_ptr) + total)
    tl.atomic_xchg(lock_ptr, 0)


def solve(x, out, n):
    out.zero_()
    lock = torch.zeros(1, dtype=torch.int32, device=x.device)
    locked_sum_kernel[(triton.cdiv(n, 512),)](x, out, lock, n, BLOCK=512)
'''


def test_a_load_add_store_under_a_lock_is_no_race(tmp_path):
    # The pattern of Triton's layer-norm tutorial: correct, and the race check must not
    # fail it (a launch that calls tl.atomic_cas is left unchecked).
    path = tmp_path / "locked.py"
    path.write_text(SPIN_LOCK)
    report = check_file(get("atomic_sum"), path, seed=0)
    assert report.passed, report.text()


def test_to_tf32_keeps_10_fraction_bits_cutting_toward_zero():
    step = 2.0 ** -10  # tf32's spacing between 1 and 2
    values = np.array([1.0, 1 + step / 2, 1 + step / 4, 1 + 3 * step / 4, -(1 + step / 2),
                       1 + step + step / 2, -(1 + 3 * step / 4), 2.0 ** 100 * (1 + step / 2),
                       np.inf, -np.inf], np.float32)
    expected = np.array([1.0, 1.0, 1.0, 1.0, -1.0, 1 + step, -1.0, 2.0 ** 100, np.inf,
                         -np.inf], np.float32)
    cut = to_tf32(values)
    assert cut.dtype == np.float32
    assert np.array_equal(cut, expected), cut - expected
    assert np.isnan(to_tf32(np.array([np.nan], np.float32))).all()


@triton.jit
def _dot_with_identity_kernel(a_ptr, eye_ptr, out_ptr, SIZE: tl.constexpr):
    offsets = tl.arange(0, SIZE)[:, None] * SIZE + tl.arange(0, SIZE)[None, :]
    product = tl.dot(tl.load(a_ptr + offsets), tl.load(eye_ptr + offsets))
    tl.store(out_ptr + offsets, product)


@pytest.mark.skipif(runtime.interpreting(), reason="the GPU's own rounding is the reference")
@pytest.mark.parametrize("size", [16, 32, 64])  # smaller tiles may take another path
def test_to_tf32_is_what_a_gpus_float32_dot_does(size):
    # a @ I on the tensor cores: each element is one operand of a times 1, plus zeros, so
    # the product is exactly what the hardware made of a's element.
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator)
    a[0, :8] = torch.tensor([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -11),
                             1 + 2.0 ** -12, 1 + 2.0 ** -11 + 2.0 ** -20, 1.0, 0.5, -2.0])
    out = torch.empty(size, size, device="cuda")
    _dot_with_identity_kernel[(1,)](a.cuda(), torch.eye(size, device="cuda"), out, SIZE=size)
    expected = torch.from_numpy(to_tf32(a.numpy()))
    assert torch.equal(out.cpu(), expected), (out.cpu() - expected).abs().max()


TF32_DOT = next(m for m in get("matvec").mistakes if m.name == "tf32_dot")


@pytest.mark.skipif(not runtime.interpreting(), reason="the interpreter's report")
@pytest.mark.parametrize("seed", [1, 5, 12])
def test_the_tf32_hint_holds_where_outputs_cancel_to_near_zero(seed):
    # An output near zero, whose terms cancel, keeps the rounding error of its terms:
    # relative to itself it can be any size. These seeds drew such outputs in
    # non_power_of_two, and the hint used to go missing there (29 of 100 seeds).
    report = check_mistake(get("matvec"), TF32_DOT, seed=seed, only=TF32_DOT.caught_by)
    assert "tf32" in _said_about(report, TF32_DOT.caught_by), report.text()


@pytest.mark.skipif(not runtime.interpreting(), reason="the interpreter's report")
def test_a_wrong_product_through_tl_dot_gets_no_tf32_hint(tmp_path, seed):
    report = check_edited_solution("matvec", [
        (TF32_DOT.old, TF32_DOT.new),
        ("tl.store(out_ptr + rows, total, mask=row_mask)",
         "tl.store(out_ptr + rows, total * 2.0, mask=row_mask)")], tmp_path, seed,
        only="non_power_of_two")
    said = _said_about(report, "non_power_of_two")
    assert "elements of out differ" in said and "tf32" not in said, report.text()


def test_float32_dot_is_rounded_to_tf32_unless_the_exercise_asks_for_dot(seed):
    matvec, tiled = get("matvec"), get("tiled_matmul")
    assert not matvec.exact_dot and tiled.exact_dot
    # The tiled_matmul solution passes at float32's tolerance in the interpreter, so its
    # tl.dot stays exact there; matvec's tf32_dot mistake is caught by the rounding.
    report = check_file(tiled, tiled.solution_path, seed=seed, only="non_power_of_two")
    assert report.passed, report.text()
