"""Measurement and plotting stay a small part of a lesson page's code.

A page teaches a kernel; timing it, drawing the timings and pictures, and reading ceilings
are the evidence, not the lesson, and belong in ``triton_guide.benchmark`` helpers that a
page calls in a line. This module counts, for every example page, the share of its code
lines (code cells only, imports and blank or comment lines left out) that measure or plot,
and fails above SHARE_LIMIT.

A statement counts as measurement when it reads a name that comes from a measuring or
plotting module (``triton_guide.benchmark``, ``matplotlib``, ``triton.testing``, ``time``,
``timeit``, ``torch.profiler``), or a name that an earlier measuring statement bound
(``bench = Benchmark()``, then ``bench.sweep(...)``, then ``results.plot()``). A name bound
again by a statement that does not measure is no longer counted. A function the page
defines counts when only measuring statements use it (the ``prepare`` functions that make a
sweep's inputs, a loop that prints each GPU's ratios). A ``@triton.jit`` kernel written on
the page never counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sphinx_gallery.py_source_parser import split_code_and_text_blocks

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PAGES = sorted(EXAMPLES.rglob("*.py"))
SHARE_LIMIT = 0.20
MEASURING_MODULES = ("triton_guide.benchmark", "matplotlib", "triton.testing", "time",
                     "timeit", "torch.profiler")
# Pages whose lesson is a measurement: their timing code is what they teach.
MEASUREMENT_IS_THE_LESSON = {
    "debugging/04_host_time.py",  # three clocks, a profiler trace, launch paths
}


def _code(path: Path) -> str:
    _, blocks = split_code_and_text_blocks(str(path))[:2]
    return "\n".join(content for label, content, *_ in blocks if label == "code")


def _names_read(node: ast.AST) -> set[str]:
    """Names a statement reads that it does not bind itself (a loop's or comprehension's
    own variables, a function's arguments and locals are left out)."""
    loaded, bound = set(), set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            (loaded if isinstance(child.ctx, ast.Load) else bound).add(child.id)
        elif isinstance(child, ast.arg):
            bound.add(child.arg)
    return loaded - bound


def _names_bound(node: ast.stmt) -> set[str]:
    """Names a top-level statement binds for the statements after it."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = list(getattr(node, "targets", []))
    if getattr(node, "target", None) is not None:
        targets.append(node.target)
    if isinstance(node, ast.With):
        targets += [item.optional_vars for item in node.items if item.optional_vars]
    return {child.id for target in targets for child in ast.walk(target)
            if isinstance(child, ast.Name)}


def _is_kernel(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        "jit" in ast.unparse(decorator) for decorator in node.decorator_list)


def measurement_lines(path: Path) -> tuple[int, int]:
    """(lines that measure or plot, code lines in all) of an example page's code cells."""
    code = _code(path)
    lines = code.split("\n")
    tree = ast.parse(code)

    def counted(node: ast.stmt) -> int:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        return sum(1 for number in range(first, node.end_lineno + 1)
                   if lines[number - 1].strip()
                   and not lines[number - 1].strip().startswith("#"))

    measuring: set[str] = set()
    statements = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))]
    measures = {}  # statement -> whether it measures
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if module and module.startswith(MEASURING_MODULES):
                measuring |= _names_bound(node)
            continue
        measures[node] = bool(_names_read(node) & measuring) and not _is_kernel(node)
        if measures[node]:
            measuring |= _names_bound(node)
        else:
            measuring -= _names_bound(node)
    # A function defined on the page that only measuring statements use measures too (and
    # so may make another function measure: repeat until nothing changes).
    functions = [node for node in statements
                 if isinstance(node, ast.FunctionDef) and not _is_kernel(node)]
    changed = True
    while changed:
        changed = False
        for function in functions:
            users = [node for node in statements
                     if node is not function and function.name in _names_read(node)]
            if not measures[function] and users and all(measures[node] for node in users):
                measures[function] = changed = True
    measured = sum(counted(node) for node in statements if measures[node])
    return measured, sum(counted(node) for node in statements)


def share(path: Path) -> float:
    measured, total = measurement_lines(path)
    return measured / total if total else 0.0


def page_id(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


LESSONS = [path for path in PAGES if page_id(path) not in MEASUREMENT_IS_THE_LESSON]


@pytest.mark.parametrize("path", LESSONS, ids=page_id)
def test_measurement_is_a_small_share_of_the_page(path):
    measured, total = measurement_lines(path)
    value = measured / total if total else 0.0
    assert value <= SHARE_LIMIT, (
        f"{page_id(path)}: {measured} of {total} code lines measure or plot ({value:.0%}, "
        f"limit {SHARE_LIMIT:.0%}): call triton_guide.benchmark helpers instead")


def test_listed_pages_exist():
    pages = {page_id(path) for path in PAGES}
    missing = MEASUREMENT_IS_THE_LESSON - pages
    assert not missing, f"listed pages that no longer exist: {missing}"


def test_the_count_follows_names_from_measuring_modules(tmp_path):
    page = tmp_path / "01_page.py"
    page.write_text(
        '"""\nTitle\n=====\n"""\n\n'
        "import torch\n"
        "import matplotlib.pyplot as plt\n"
        "from triton_guide.benchmark import Benchmark\n\n"
        "@triton.jit\n"
        "def kernel(x_ptr):\n"
        "    tl.store(x_ptr, bench)\n\n"  # a kernel never counts, whatever it reads
        "x = torch.randn(8)\n"
        "bench = Benchmark()\n"  # measures
        "results = bench.sweep('t', [1], {})\n"  # reads bench: measures
        "for run in results:\n"  # reads results: both lines measure
        "    print(run)\n"
        "results = x * 2\n"  # bound again by a statement that does not measure
        "print(results.sum())\n"  # so this one does not measure
        "squares = [x * x for x in range(3)]\n"  # its own x: does not measure
        "figure, axes = plt.subplots()\n"  # plotting measures
        "def prepare(n):\n"  # used only by a measuring statement: measures
        "    return lambda: torch.randn(n)\n"
        "def shared(n):\n"  # used by a measuring statement and by one that is not
        "    return n * 2\n"
        "print(shared(3))\n"
        "other = bench.sweep('u', [1], {'a': prepare, 'b': shared})\n")
    assert measurement_lines(page) == (8, 18)
