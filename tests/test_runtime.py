"""The execution mode chosen at import: GPU or interpreter, and the import-order trap."""

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


@needs_cpu
def test_importing_triton_first_is_named_before_it_fails():
    done = run_python("import triton; " + SOFTMAX_OF_A_SMALL_INPUT)
    # The failure itself is Triton's; the warning before it says why and what to do.
    assert (done.returncode != 0, "imported before triton_guide" in done.stderr,
            "Import triton_guide first" in done.stderr) == (True, True, True), done.stderr


def _first_import_line(source: str, module: str) -> int | None:
    pattern = re.compile(rf"^(import {module}\b(?!_)|from {module}\b(?!_))", re.M)
    found = pattern.search(source)
    return None if found is None else source.count("\n", 0, found.start())


PAGES_THAT_IMPORT_TRITON = [page for page in sorted((ROOT / "examples").glob("*/*.py"))
                            if _first_import_line(page.read_text(), "triton") is not None]


@pytest.mark.parametrize("page", PAGES_THAT_IMPORT_TRITON,
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_page_imports_triton_after_triton_guide(page):
    """A reader who copies a page runs it as a script: triton first would break it on a CPU."""
    source = page.read_text()
    triton_line = _first_import_line(source, "triton")
    guide_line = _first_import_line(source, "triton_guide")
    assert guide_line is not None and guide_line < triton_line, (
        f"{page.name}: line {triton_line + 1} imports triton before triton_guide")


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
