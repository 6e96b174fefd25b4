"""The tree's layout rules: the lab stays out of the package and the pages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE_FILES = sorted([*(ROOT / "triton_guide").rglob("*.py"), *(ROOT / "examples").rglob("*.py"),
                      *(ROOT / "examples").rglob("*.txt")])
LAB_MODULES = {path.stem for path in (ROOT / "lab").glob("*.py")}


def imported_names(path: Path) -> set[str]:
    """Top-level names of every module that ``path`` imports (absolute imports only)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_lab_holds_what_was_moved_there():
    assert {"tune", "profile_case", "softmax_layouts"} <= LAB_MODULES
    assert (ROOT / "lab" / "NOTES.md").is_file() and (ROOT / "lab" / "README.md").is_file()
    assert not (ROOT / "benchmarks" / "tune.py").exists()


@pytest.mark.parametrize("path", [p for p in GUIDE_FILES if p.suffix == ".py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_guide_files_import_nothing_from_the_lab(path):
    names = imported_names(path)
    assert not names & ({"lab"} | LAB_MODULES), f"{path.name} imports from lab/"
    assert "lab/" not in re.sub(r"\s+", " ", path.read_text()).replace("collab/", ""), (
        f"{path.name} points into lab/")


LAB_FILES = sorted(path.name for path in (ROOT / "lab").iterdir() if path.is_file())


@pytest.mark.parametrize("path", GUIDE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_guide_files_cite_no_lab_notes_or_scripts(path):
    text = path.read_text()
    cited = [name for name in LAB_FILES if name in text]
    assert not cited, (f"{path.relative_to(ROOT)} cites {cited} of lab/: state what was "
                       "measured in the code's own terms instead")


def test_the_checks_above_would_catch_a_lab_import(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import torch\nfrom lab.tune import MATMUL_SHAPES\nimport tune\n")
    assert {"lab", "tune"} <= imported_names(page)


# Module sizes: past these a module does more than one job (split it by job, as
# triton_guide/benchmark/ and triton_guide/exercises/ are).
MOST_LINES = 700
MOST_LINES_IN_BENCHMARK = 400


@pytest.mark.parametrize("path", sorted((ROOT / "triton_guide").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_package_module_is_too_long(path):
    most = MOST_LINES_IN_BENCHMARK if path.parent.name == "benchmark" else MOST_LINES
    lines = len(path.read_text().splitlines())
    assert lines <= most, f"{path.relative_to(ROOT)} has {lines} lines (at most {most})"
