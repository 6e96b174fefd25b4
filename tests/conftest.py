"""Shared fixtures: fresh random seeds, the device, and a record of every comparison made."""

from __future__ import annotations

import os
from collections import defaultdict

import pytest
import torch

from triton_guide import runtime
from triton_guide.testing import assert_close

# (op) -> list of (shape, dtype, relative error), filled by the `check` fixture.
_RESULTS: dict[str, list[tuple[tuple[int, ...], torch.dtype, float]]] = defaultdict(list)

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
    """A fresh seed for every test, printed so that a failure can be replayed."""
    value = int.from_bytes(os.urandom(4), "little")
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
def check():
    """``check(op, actual, reference, rtol=..., atol=..., name=...)``: compare and record."""

    def compare(op, actual, reference, *, rtol, atol=0.0, name="output"):
        error = assert_close(actual, reference, rtol=rtol, atol=atol, name=name)
        _RESULTS[op].append((tuple(actual.shape), actual.dtype, error))
        return error

    return compare


def pytest_report_header(config):
    return f"triton_guide runs on: {runtime.describe()}"


def pytest_terminal_summary(terminalreporter):
    if not _RESULTS:
        return
    terminalreporter.section("largest shape and largest relative error per op")
    for op in sorted(_RESULTS):
        rows = _RESULTS[op]
        largest = max(rows, key=lambda row: torch.Size(row[0]).numel())
        worst = max(rows, key=lambda row: row[2])
        terminalreporter.write_line(
            f"{op:<22} {len(rows):>4} checks; largest {largest[0]} {str(largest[1])[6:]}; "
            f"largest relative error {worst[2]:.2e} ({worst[0]} {str(worst[1])[6:]})"
        )
