"""Downloads (docs/_ext/downloads.py): the install command, kernels as code, use_local.

The built site itself is checked by tests/site (the package installed from it, every
download run); these check the pieces on their own, without a build.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import triton_guide
from triton_guide import runtime, vector_add
from triton_guide.local import use_local

pytest.importorskip("sphinx")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import downloads  # noqa: E402

COMMAND = "pip install http://127.0.0.1:8000/dist/triton_guide-0.1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def config():
    from sphinx.config import Config

    return Config({"source_encoding": "utf-8-sig"})


# Pages of the shape the gallery's are, showing package code as the lessons do; their own
# text, so that these tests follow the package and not the lessons' wording.
VECTOR_ADD_PAGE = '''"""
Title
=====
"""

# %%
# The kernel:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add_kernel
#
# Line by line, and the reference:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add_reference
#    :start-at: return
#
# The end.

import torch
from triton_guide import vector_add
print(vector_add(torch.ones(3), torch.ones(3)))
'''

REDUCTION_PAGE = '''"""
Title
=====
"""

# %%
# A helper:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: program_sum
#
# and the kernel that calls it:
#
# .. literalinclude:: /../triton_guide/reduction.py
#    :pyobject: partial_sums_kernel

print("done")
'''


def rewrite(text: str, config) -> str:
    return downloads.rewrite_script(text, ROOT / "docs", ROOT / "examples", config,
                                    ROOT / "triton_guide", (COMMAND, "http://127.0.0.1:8000/"))


def test_the_command_installs_the_wheel_served_under_the_site_address():
    assert (downloads.wheel_filename("triton-guide", "0.1.0"),
            downloads.install_command("http://example.test/guide", "triton-guide", "0.1.0")) == (
        "triton_guide-0.1.0-py3-none-any.whl",
        "pip install http://example.test/guide/dist/triton_guide-0.1.0-py3-none-any.whl")


def test_the_conf_and_the_package_give_one_version():
    from setuptools.config.pyprojecttoml import read_configuration

    project = read_configuration(ROOT / "pyproject.toml")["project"]
    assert (project["dynamic"], triton_guide.__version__) == (
        ["version"], project.get("version", triton_guide.__version__))


def test_free_names_are_the_globals_a_kernel_reads():
    code = textwrap.dedent("""\
        @triton.jit
        def kernel(x_ptr, BLOCK: tl.constexpr = DEFAULT):
            offsets = tl.arange(0, BLOCK)
            value = helper(tl.load(x_ptr + offsets))
            for i in range(2):
                value += i
            tl.store(x_ptr + offsets, value)
        """)
    assert downloads.free_names(code) == ["DEFAULT", "helper", "tl", "triton"]


def test_the_vector_add_script_has_its_kernel_as_code_and_the_command_first(config):
    text = rewrite(VECTOR_ADD_PAGE, config)
    tree = ast.parse(text)  # a valid script
    kernels = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.decorator_list]
    calls = [ast.unparse(n) for n in tree.body
             if isinstance(n, ast.Expr) and ast.unparse(n).startswith("use_local(")]
    launcher_as_comment = any(line.startswith("#") and line.endswith("return x + y")
                              for line in text.splitlines())
    assert (COMMAND in "\n".join(text.splitlines()[:6]), kernels, calls,
            "literalinclude" in text, launcher_as_comment) == (
        True, ["vector_add_kernel"], ["use_local('triton_guide.vector_add', vector_add_kernel)"],
        False, True)


def test_a_kernel_calling_a_helper_shown_above_uses_that_helper(config):
    text = rewrite(REDUCTION_PAGE, config)
    blocks = text.split(downloads.CODE_MARK)[1:]
    imports_of = {}
    for block in blocks:
        name = block.split("def ", 1)[1].split("(", 1)[0]
        imports_of[name] = [line for line in block.splitlines() if line.startswith("from triton_guide.reduction")]
    # program_sum is shown (as code) before partial_sums_kernel, which calls it.
    assert (list(imports_of)[:2], imports_of["partial_sums_kernel"]) == (
        ["program_sum", "partial_sums_kernel"], [])


def test_a_rewritten_script_is_left_alone_the_second_time(config):
    once = rewrite(VECTOR_ADD_PAGE, config)
    again = downloads.rewrite_script(once, ROOT / "docs", ROOT / "examples" / "basics", config,
                                     ROOT / "triton_guide", (COMMAND, "x"))
    assert again == once


def test_notebook_cells_are_cut_at_the_kernel(config):
    markdown = ("Here is the kernel:\n\n"
                ".. literalinclude:: /../triton_guide/vector_add.py\n"
                "   :pyobject: vector_add_kernel\n\nLine by line.\n\n"
                ".. literalinclude:: /../triton_guide/vector_add.py\n"
                "   :pyobject: vector_add_reference\n   :start-at: return\n")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": [markdown]}]
    page_dir = ROOT / "docs" / "auto_examples" / "basics"
    new, changed = downloads.split_kernel_cells(cells, ROOT / "docs", page_dir, config,
                                                ROOT / "triton_guide")
    kinds = [cell["cell_type"] for cell in new]
    code = "".join(new[1]["source"])
    assert (changed, kinds, "def vector_add_kernel(" in code, "use_local(" in code,
            ":pyobject: vector_add_reference\n" in "".join(new[2]["source"])) == (
        True, ["markdown", "code", "markdown"], True, True, True)
    again, changed_again = downloads.split_kernel_cells(new, ROOT / "docs", page_dir, config,
                                                        ROOT / "triton_guide")
    assert (json.dumps(again) == json.dumps(new), changed_again) == (True, False)


SUBTRACTING_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, num_elements, BLOCK_SIZE: tl.constexpr,
                      INT64_OFFSETS: tl.constexpr = False):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < num_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x - y, mask=mask)
'''


def test_use_local_makes_the_launcher_run_the_copy(tmp_path):
    source = tmp_path / "learner_copy.py"
    source.write_text(SUBTRACTING_KERNEL)  # triton.jit reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("learner_copy", source)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    module = sys.modules["triton_guide.vector_add"]
    original = module.vector_add_kernel
    x, y = torch.randn(2, 1000, device=runtime.device()).unbind(0)
    try:
        rebound = use_local("triton_guide.vector_add", copy.vector_add_kernel)
        edited = vector_add(x, y)
    finally:
        use_local("triton_guide.vector_add", original)
    assert (rebound >= 1, torch.equal(edited, x - y), torch.equal(vector_add(x, y), x + y)) == (
        True, True, True)


@pytest.mark.parametrize("module, obj, message", [
    ("numpy", vector_add, "must name a module of triton_guide"),
    ("triton_guide.softmax", vector_add, "defines no 'vector_add'"),
    ("triton_guide.vector_add", 3, "cannot tell the name"),
])
def test_use_local_refuses_what_it_cannot_place(module, obj, message):
    with pytest.raises((ValueError, TypeError), match=message):
        use_local(module, obj)


def test_an_include_sphinx_cannot_read_is_left_for_sphinx_to_report(config):
    page = VECTOR_ADD_PAGE.replace(":start-at: return", ":start-at: no such line")
    text = rewrite(page, config)
    assert (":start-at: no such line" in text, "def vector_add_kernel(" in text) == (True, True)
