"""CONTRIBUTING.md's three checklists against the tree: every file and folder it names
exists, every ``make`` target and ``python -m`` module it names is there, and the names it
tells a contributor to use are defined where it says."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "CONTRIBUTING.md").read_text()
CODE_SPANS = re.findall(r"`([^`\n]+)`", TEXT)
CHECKLISTS = ["Adding an op", "Adding a lesson page", "Adding an exercise"]


def section(heading: str) -> str:
    start = TEXT.index(f"## {heading}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start:end if end != -1 else len(TEXT)]


def named_paths() -> list[str]:
    """The concrete paths in code spans: placeholders (``<op>``, ``NN_``) left out."""
    found = []
    for span in CODE_SPANS:
        for token in span.split():
            token = token.strip("(),:;")
            if token.startswith("$") or "<" in token or "NN_" in token or "=" in token:
                continue
            if "/" in token or re.search(r"\.(py|md|txt|toml|json)$", token):
                found.append(token.split(":")[0])
    return sorted(set(found))


def defined_names(path: Path) -> set[str]:
    """Top-level functions, classes and assigned names of a Python file."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_there_are_three_numbered_checklists():
    for heading in CHECKLISTS:
        steps = re.findall(r"^(\d+)\. ", section(heading), re.M)
        assert steps == [str(i) for i in range(1, len(steps) + 1)] and len(steps) >= 4, heading


def exists(path: str) -> bool:
    """A path from the root; a bare file name (``runtime.py`` in a list of the package's
    modules, ``README.txt`` of a section) anywhere in the tree outside .git and .venv."""
    if "/" in path.rstrip("/"):
        return (ROOT / path.rstrip("/")).exists()
    return any(".git" not in found.parts and ".venv" not in found.parts
               for found in ROOT.rglob(path.rstrip("/")))


@pytest.mark.parametrize("path", named_paths())
def test_every_named_path_exists(path):
    assert exists(path), f"CONTRIBUTING.md names {path}, which is not there"


def test_the_path_check_sees_the_checklists_files():
    paths = named_paths()
    assert {"triton_guide/vector_add.py", "triton_guide/exercises/__init__.py",
            "examples/basics/01_vector_add.py", "tests/conftest.py"} <= set(paths), paths


def test_every_make_target_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    named = {m for span in CODE_SPANS for m in re.findall(r"\bmake ([a-z][a-z-]*)", span)}
    assert named and {"bench", "html", "pytest", "browser-test"} <= named
    assert named <= targets, f"not in the Makefile: {named - targets}"


def test_every_python_module_run_with_dash_m_exists():
    modules = {m for span in CODE_SPANS for m in re.findall(r"python -m ([\w.]+)", span)}
    assert "triton_guide.exercises" in modules
    assert all(importlib.util.find_spec(module) for module in modules), modules


def test_the_op_checklist_names_the_op_to_copy_and_the_registry_step():
    from pathlib import Path

    from triton_guide import library, registry

    op = section("Adding an op")
    assert "Copy from `triton_guide/vector_add.py`" in op
    for name in ("registry.register", "registry.MODULES", "library.Operator",
                 "tests/test_registry.py"):
        assert name in op, name
    assert callable(registry.register) and callable(library.Operator)
    package = Path(registry.__file__).parent
    for module in registry.MODULES:  # the list the checklist says to extend
        assert (package / f"{module}.py").is_file(), module


def test_the_names_it_tells_to_use_are_defined_where_it_says():
    expected = {
        "triton_guide/validation.py": {"check_tensor", "check_same_shape"},
        "triton_guide/launch.py": {"fast_launch"},
        "triton_guide/runtime.py": {"pick"},
        "triton_guide/hardware.py": {"multiprocessors", "has_tma", "num_warps_for"},
        "triton_guide/exercises/cases.py": {"Case", "Output", "Mistake", "largest", "randn",
                                            "size_between", "strided", "stored_by_columns"},
        "triton_guide/exercises/__init__.py": {"NAMES"},
        "tests/conftest.py": {"FLOAT_DTYPES", "device", "check", "seed", "wrong_device"},
        "conf.py": {"GALLERY_SECTIONS"},
    }
    for path, names in expected.items():
        assert all(any(re.search(rf"\b{name}\b", span) for span in CODE_SPANS)
                   for name in names), path
        missing = names - defined_names(ROOT / path)
        assert not missing, f"{path} does not define {missing}"
    from triton_guide.benchmark import Benchmark
    assert callable(Benchmark.sweep) and callable(Benchmark.measure)


def test_the_exercise_checklist_lists_the_standard_cases_the_tests_require():
    tests = (ROOT / "tests" / "test_exercises.py").read_text()
    standard = ast.literal_eval(re.search(r"STANDARD_CASES = (\{.*?\})", tests).group(1))
    exercise = section("Adding an exercise")
    assert all(f"`{case}`" in exercise for case in standard), standard


def test_nothing_stale():
    assert "timings_meaningful" not in TEXT  # no page benchmarks through it: Benchmark does
