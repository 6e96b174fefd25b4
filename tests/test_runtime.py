"""The execution mode chosen at import: GPU or interpreter, whichever of triton and
triton_guide is imported first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX_OF_A_SMALL_INPUT = "import torch; from triton_guide import softmax; " \
    "print(softmax(torch.ones(2, 3)).sum().item())"


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | (env or {})
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True)


# The child processes see the machine as it is (TRITON_INTERPRET removed), so what counts
# is whether this machine has a GPU, not whether this test process interprets.
needs_cpu = pytest.mark.skipif(torch.cuda.is_available(),
                               reason="the interpreter is chosen only without a GPU")


@needs_cpu
def test_without_a_gpu_the_interpreter_is_chosen_and_said_once():
    done = run_python(SOFTMAX_OF_A_SMALL_INPUT)
    assert (done.returncode, done.stdout.strip(), done.stderr.count("Triton interpreter"),
            "imported before" in done.stderr) == (0, "2.0", 1, False), done.stderr


# A kernel of the reader's own, defined after both imports, that calls Triton's library
# functions both ways: as tl.* functions and as tensor methods.
ROW_MAX_MINUS_MEAN = """
import torch
import triton
import triton.language as tl

@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    total = x.sum(axis=0)
    top = tl.max(tl.where(offsets < n, x, -float("inf")), axis=0)
    tl.store(out_ptr, top - total / n + tl.sigmoid(x * 0.0).sum() / BLOCK - 0.5)

x, out = torch.arange(5.0), torch.empty(1)
kernel[(1,)](x, out, 5, BLOCK=8)
print(out.item())
"""


@needs_cpu
@pytest.mark.parametrize("first", ["import triton", "import triton.language as tl",
                                   "from triton.language import standard"])
def test_importing_triton_first_still_interprets(first):
    """triton imported before triton_guide: the package's kernels and the reader's, defined
    after, still run in the interpreter, Triton's library functions included."""
    done = run_python(f"{first}\nimport triton_guide\n" + SOFTMAX_OF_A_SMALL_INPUT.replace(
        "; ", "\n") + "\n" + ROW_MAX_MINUS_MEAN)
    assert (done.returncode, done.stdout.split(), done.stderr.count("Triton interpreter")) == (
        0, ["2.0", "2.0"], 1), done.stderr


@needs_cpu
def test_the_library_functions_are_converted_once_and_only_when_needed():
    code = ("import triton\nimport triton.language as tl\nbefore = type(tl.max).__name__\n"
            "from triton_guide import runtime\n"
            "print(before, type(tl.max).__name__, type(tl.sum).__name__,"
            " runtime._interpret_imported_triton())")
    done = run_python(code)
    # all converted at import; a second pass finds nothing left to convert
    assert done.stdout.split() == ["JITFunction", "InterpretedFunction", "InterpretedFunction",
                                   "0"], done.stderr
    done = run_python("import triton_guide\nimport triton.language as tl\n"
                      "print(type(tl.max).__name__)")
    assert done.stdout.split() == ["InterpretedFunction"], done.stderr


PAGES = sorted((ROOT / "examples").glob("*/*.py"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_page_needs_an_import_order(page):
    """Importing triton first works, so no page keeps a triton import below other code."""
    lines = [line for line in page.read_text().splitlines()
             if re.match(r"(import|from) triton\b(?!_)", line) and "E402" in line]
    assert lines == [], f"{page.name}: {lines}"


@pytest.mark.parametrize("triton_version, numpy_version, conflict", [
    pytest.param("3.6.0", "2.4.6", True, id="triton_3.6_numpy_2.4_fails"),
    pytest.param("3.6.0", "2.4.0rc1", True, id="a_release_candidate_counts"),
    pytest.param("3.6.0", "2.3.5", False, id="numpy_2.3_only_warns"),
    pytest.param("3.7.1", "2.4.6", False, id="triton_3.7_fixed_it"),
    pytest.param("3.9.0", "2.4.6", False, id="the_cpu_pins"),
    pytest.param("3.10.0", "3.0.0", False, id="two_digit_minor"),
])
def test_numpy_conflict_names_triton_3_6_with_numpy_2_4(triton_version, numpy_version,
                                                          conflict):
    from triton_guide.runtime import numpy_conflict

    said = numpy_conflict(triton_version, numpy_version)
    assert (said is not None) == conflict, said
    if conflict:
        assert 'pip install "numpy<2.4"' in said and triton_version in said


@pytest.mark.parametrize("interpret", [False, True], ids=["as_found", "interpreter_asked"])
def test_the_numpy_warning_comes_where_the_interpreter_runs(interpret):
    from importlib.metadata import version

    from triton_guide.runtime import numpy_conflict
    done = run_python("import triton_guide", env={"TRITON_INTERPRET": "1"} if interpret else None)
    conflict = numpy_conflict(version("triton"), version("numpy")) is not None
    # On a GPU the import interprets nothing and says nothing, whatever numpy is there.
    expected = conflict and (interpret or not torch.cuda.is_available())
    assert ("fails on numpy" in done.stderr) == expected, done.stderr
