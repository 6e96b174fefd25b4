"""The execution mode chosen at import: GPU or interpreter, and the import-order trap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triton_guide import runtime

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX_OF_A_SMALL_INPUT = "import torch; from triton_guide import softmax; " \
    "print(softmax(torch.ones(2, 3)).sum().item())"


def run_python(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True)


needs_cpu = pytest.mark.skipif(not runtime.interpreting(),
                               reason="the interpreter is chosen only without a GPU")


@needs_cpu
def test_without_a_gpu_the_interpreter_is_chosen_and_said_once():
    done = run_python(SOFTMAX_OF_A_SMALL_INPUT)
    assert (done.returncode, done.stdout.strip(), done.stderr.count("Triton interpreter")) == (
        0, "2.0", 1), done.stderr


@needs_cpu
def test_importing_triton_first_is_named_before_it_fails():
    done = run_python("import triton; " + SOFTMAX_OF_A_SMALL_INPUT)
    # The failure itself is Triton's; the warning before it says why and what to do.
    assert (done.returncode != 0, "imported before triton_guide" in done.stderr,
            "Import triton_guide first" in done.stderr) == (True, True, True), done.stderr
