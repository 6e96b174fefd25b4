"""Lesson pages keep their code cells short enough to hold in view.

A code cell of an example page (``examples/**/*.py``, cells as sphinx-gallery splits them)
may run to CELL_LIMIT lines. The kernel being taught does not count: a kernel shown with
``literalinclude`` lives in the cell's text (comments in the source), and a ``@triton.jit``
function written on the page is left out of its cell's count. Measurement and plotting
code belongs in ``triton_guide.benchmark`` helpers, not in a long cell.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from sphinx_gallery.py_source_parser import split_code_and_text_blocks

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PAGES = sorted(EXAMPLES.rglob("*.py"))
CELL_LIMIT = 30


def kernel_lines(code: str) -> set[int]:
    """Line numbers (1-based, in ``code``) of every top-level ``@triton.jit`` function,
    decorators included: the kernels a page writes out to teach them."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(decorator) for decorator in node.decorator_list):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(first, node.end_lineno + 1))
    return lines


def heading(text: str) -> str | None:
    """The RST section title that opens a text block (a line underlined by -, = or ~)."""
    lines = [line.removeprefix("#").strip() for line in text.splitlines()]
    for title, underline in zip(lines, lines[1:]):
        if title and re.fullmatch(r"([-=~^])\1{2,}", underline):
            return title
    return None


def cell_lengths(path: Path) -> dict[str, int]:
    """Each code cell's length in lines, kernels left out, by the heading of the section
    it sits in (the longest cell where a section has several)."""
    _, blocks = split_code_and_text_blocks(str(path))[:2]
    section, lengths = "(first cell)", {}
    for label, content, *_ in blocks:
        if label == "text":
            section = heading(content) or section
            continue
        code = content.strip("\n")
        if not code.strip():
            continue
        kernels = kernel_lines(code)
        counted = [line for number, line in enumerate(code.split("\n"), 1)
                   if number not in kernels]
        while counted and not counted[-1].strip():
            counted.pop()
        while counted and not counted[0].strip():
            counted.pop(0)
        lengths[section] = max(lengths.get(section, 0), len(counted))
    return lengths


def page_id(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


@pytest.mark.parametrize("path", PAGES, ids=page_id)
def test_code_cells_fit_in_view(path):
    too_long = [f"{section!r}: {length} lines (limit {CELL_LIMIT})"
                for section, length in cell_lengths(path).items() if length > CELL_LIMIT]
    assert not too_long, (f"{page_id(path)}: code cells over the limit; move measurement "
                          "and plotting into triton_guide.benchmark helpers or split the "
                          "cell:\n  " + "\n  ".join(too_long))


def test_cell_lengths_leave_out_a_kernel_written_on_the_page(tmp_path):
    body = "\n".join(f"value_{k} = {k}" for k in range(CELL_LIMIT))
    kernel = "\n".join(["@triton.jit", "def kernel(x_ptr):"]
                       + [f"    x_{k} = tl.load(x_ptr + {k})" for k in range(40)])
    page = tmp_path / "01_page.py"
    page.write_text(f'"""\nTitle\n=====\n"""\n\n# %%\n# A kernel\n# --------\n\n{kernel}\n\n'
                    f"{body}\n\n# %%\n# Plotting\n# --------\n\n{body}\nextra = 1\n")
    assert cell_lengths(page) == {"A kernel": CELL_LIMIT, "Plotting": CELL_LIMIT + 1}


_INCLUDE = re.compile(r"^#\s*\.\.\s+literalinclude::\s*/\.\./(\S+)\n#\s+:pyobject:\s*(\S+)",
                      re.MULTILINE)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_included_object_is_defined_in_the_file_named(page):
    # A function moved to another module leaves the page's literalinclude pointing at a
    # file without it, which only the site build would find.
    for path, name in _INCLUDE.findall(page.read_text()):
        tree = ast.parse((ROOT / path).read_text())
        defined = {node.name for node in tree.body
                   if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert name in defined, f"{page.name} includes {name} from {path}, which does not define it"
