"""benchmarks/report.py --merge: the geometric means over parts saved by separate runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def part(path: Path, ratios: dict[str, float]) -> Path:
    path.write_text(json.dumps([{"op": "matmul", "baseline": "cuBLAS", "ratio": ratio,
                                 "what": what} for what, ratio in ratios.items()]))
    return path


def test_merge_takes_each_shape_once_and_prints_the_geometric_mean(tmp_path):
    first = part(tmp_path / "a.json", {"fp16 1x1x1": 0.5, "fp16 2x2x2": 2.0})
    # The second part measured 2x2x2 again: the first file's ratio is kept.
    second = part(tmp_path / "b.json", {"fp16 2x2x2": 8.0, "bf16 3x3x3": 1.0})
    done = subprocess.run([sys.executable, "benchmarks/report.py", "--merge", str(first),
                           str(second)], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "b.json: 1 ratio of shapes an earlier file has, left out" in done.stdout
    (mean_line,) = [line for line in done.stdout.splitlines() if line.startswith("  matmul")]
    # (0.5 * 2.0 * 1.0) ** (1 / 3) = 1.00, over 3 shapes; with 8.0 counted it would be 1.59.
    assert mean_line.split() == ["matmul", "vs", "cuBLAS", "1.00x", "over", "3", "shapes;",
                                 "worst", "0.50x", "(fp16", "1x1x1)"]
