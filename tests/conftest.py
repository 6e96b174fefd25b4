"""Shared fixtures: fresh random seeds, the device, and a record of every comparison made."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest
import torch

from triton_guide import runtime
from triton_guide.testing import assert_close

# op -> list of (shape, dtype name, relative error), filled by the `check` fixture (and, under
# pytest-xdist, gathered from the workers when they finish).
_RESULTS: dict[str, list[tuple[tuple[int, ...], str, float]]] = defaultdict(list)

# FLOAT32_MATMUL_PRECISION=high (or medium, or highest, PyTorch's default) runs the session
# under that torch.set_float32_matmul_precision: the package's float32 tl.dot follows it,
# and so do the tolerances of triton_guide.testing.tolerance(..., tensor_cores=True).
if os.environ.get("FLOAT32_MATMUL_PRECISION"):
    torch.set_float32_matmul_precision(os.environ["FLOAT32_MATMUL_PRECISION"])

BF16_NEEDS_GPU = pytest.mark.skipif(
    runtime.interpreting(),
    reason="needs a GPU: the Triton interpreter has no bfloat16 arithmetic",
)
FLOAT_DTYPES = [
    pytest.param(torch.float32, id="float32"),
    pytest.param(torch.float16, id="float16"),
    pytest.param(torch.bfloat16, id="bfloat16", marks=BF16_NEEDS_GPU),
]


@pytest.fixture(autouse=True)
def seed() -> int:
    """A fresh seed for every test, printed so that a failure can be replayed.

    To replay one: ``TEST_SEED=<the printed seed> pytest tests/...::<the failed test>``.
    """
    replay = os.environ.get("TEST_SEED")
    value = int(replay) if replay else int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(value)
    print(f"seed={value}")
    return value


@pytest.fixture
def device() -> torch.device:
    return runtime.device()


@pytest.fixture
def wrong_device() -> torch.device:
    """A device that kernels cannot read in the current mode."""
    return torch.device("meta") if runtime.interpreting() else torch.device("cpu")


@pytest.fixture
def launched(monkeypatch):
    """The kernels ``triton_guide.matmul`` launches (through ``fast_launch``), in order."""
    import importlib

    module = importlib.import_module("triton_guide.matmul")  # the package exports the function
    kernels = []
    real_fast_launch = module.fast_launch

    def spied_fast_launch(kernel):
        kernels.append(kernel)
        return real_fast_launch(kernel)

    monkeypatch.setattr(module, "fast_launch", spied_fast_launch)
    return kernels


@pytest.fixture
def check():
    """``check(op, actual, reference, rtol=..., atol=..., name=...)``: compare and record."""

    def compare(op, actual, reference, *, rtol, atol=0.0, name="output"):
        error = assert_close(actual, reference, rtol=rtol, atol=atol, name=name)
        _RESULTS[op].append((tuple(actual.shape), str(actual.dtype).removeprefix("torch."), error))
        return error

    return compare


def pytest_report_header(config):
    from triton_guide.precision import dot_input_precision, float32_matmul_precision

    return (f"triton_guide runs on: {runtime.describe()}; float32 matmul precision "
            f"{float32_matmul_precision()!r} (tl.dot input_precision "
            f"{dot_input_precision(torch.float32)!r})")


def pytest_sessionfinish(session):
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # an xdist worker: hand the records to the controller
        worker_output["triton_guide_results"] = [
            (op, list(shape), dtype, error) for op, rows in _RESULTS.items() for shape, dtype, error in rows
        ]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for op, shape, dtype, relative_error in node.workeroutput.get("triton_guide_results", []):
        _RESULTS[op].append((tuple(shape), dtype, relative_error))


def pytest_terminal_summary(terminalreporter):
    if not _RESULTS:
        return
    terminalreporter.section("largest shape and largest relative error per op and dtype")
    for op in sorted(_RESULTS):
        for dtype in sorted({row[1] for row in _RESULTS[op]}):
            rows = [row for row in _RESULTS[op] if row[1] == dtype]
            largest = max(rows, key=lambda row: torch.Size(row[0]).numel())
            worst = max(rows, key=lambda row: row[2])
            terminalreporter.write_line(
                f"{op:<20} {dtype:<9} {len(rows):>3} checks; largest {largest[0]}; "
                f"largest relative error {worst[2]:.2e} at {worst[0]}"
            )


@pytest.fixture(autouse=True)
def _fresh_matmul_plans():
    """matmul keeps the decisions it made per input layout (triton_guide.matmul._plans);
    tests that patch the functions behind those decisions must not find another test's."""
    import sys

    module = sys.modules["triton_guide.matmul"]
    module._plans.clear()
    yield
    module._plans.clear()
