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


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
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
