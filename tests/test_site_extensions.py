"""The site's Sphinx extensions (docs/_ext): stale pages re-run, notebooks carry the code.

One small Sphinx project in a temporary folder (a package with two modules, two gallery
pages that use one module each) is built three times: a module edit must re-execute
exactly the page that uses it, and a rebuild with no change must execute none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sphinx_gallery")
EXTENSIONS = Path(__file__).resolve().parents[1] / "docs" / "_ext"

CONF = f"""
import sys
sys.path.insert(0, {str(EXTENSIONS)!r})
sys.path.insert(0, {{root!r}})
extensions = ["sphinx_gallery.gen_gallery", "page_deps", "notebooks"]
page_deps_package = "toypkg"
page_deps_package_dir = {{root!r}} + "/toypkg"
exclude_patterns = ["_build"]
sphinx_gallery_conf = {{{{
    "examples_dirs": "examples", "gallery_dirs": "auto_examples",
    "filename_pattern": "/", "write_computation_times": False,
    "first_notebook_cell": "%pip install toypkg",
}}}}
"""

PAGE = '''"""
{title}
{underline}

Shows a function.
"""

# %%
# The function:
#
# .. literalinclude:: /../toypkg/{module}.py
#    :pyobject: {function}

import os
from toypkg.{module} import {function}

with open(os.environ["RUN_LOG"], "a") as log:
    log.write("{name}\\n")
print({function}())
'''


@pytest.fixture
def project(tmp_path):
    (tmp_path / "toypkg").mkdir()
    (tmp_path / "toypkg" / "__init__.py").write_text("")
    (tmp_path / "toypkg" / "helpers.py").write_text("def base():\n    return 1\n")
    for module, function in [("alpha", "alpha"), ("beta", "beta")]:
        (tmp_path / "toypkg" / f"{module}.py").write_text(
            f"from .helpers import base\n\n\ndef {function}():\n    return base() + 1\n"
        )
    docs = tmp_path / "docs"
    (docs / "examples").mkdir(parents=True)
    (docs / "conf.py").write_text(CONF.format(root=str(tmp_path)))
    (docs / "index.rst").write_text("Toy\n===\n\n.. toctree::\n\n   auto_examples/index\n")
    (docs / "examples" / "README.txt").write_text("Pages\n=====\n")
    for name, module in [("page_alpha", "alpha"), ("page_beta", "beta")]:
        title = f"Page using {module}"
        (docs / "examples" / f"{name}.py").write_text(
            PAGE.format(title=title, underline="=" * len(title), module=module,
                        function=module, name=name)
        )
    return tmp_path


def build(project: Path) -> list[str]:
    """Build the toy site; return the pages that were executed."""
    log = project / "run.log"
    log.write_text("")
    env = {"RUN_LOG": str(log), "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # where Sphinx is installed, when it is not site-packages
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", "docs", "docs/_build"],
        cwd=project, capture_output=True, text=True, env=env,
    )
    assert done.returncode == 0, f"the toy site did not build:\n{done.stderr[-3000:]}"
    return sorted(log.read_text().split())


def test_a_module_edit_reruns_exactly_the_pages_that_use_it(project):
    assert build(project) == ["page_alpha", "page_beta"]
    assert build(project) == [], "a rebuild with nothing changed executed pages"
    alpha = project / "toypkg" / "alpha.py"
    alpha.write_text(alpha.read_text().replace("+ 1", "+ 2"))
    assert build(project) == ["page_alpha"]
    helpers = project / "toypkg" / "helpers.py"  # imported by both modules
    helpers.write_text(helpers.read_text().replace("1", "3"))
    assert (build(project), build(project)) == (["page_alpha", "page_beta"], [])


def test_notebook_shows_the_included_code_and_installs_first(project):
    build(project)
    notebook = json.loads(
        (project / "docs" / "auto_examples" / "page_alpha.ipynb").read_text()
    )
    first = "".join(notebook["cells"][0]["source"])
    text = "\n".join("".join(cell["source"]) for cell in notebook["cells"])
    expected = textwrap.dedent("""\
        ```python
        def alpha():
            return base() + 1
        ```""")
    assert (first, "literalinclude" in text, expected in text) == (
        "%pip install toypkg", False, True)


def _notebooks_module():
    sys.path.insert(0, str(EXTENSIONS))
    try:
        import notebooks
    finally:
        sys.path.remove(str(EXTENSIONS))
    return notebooks


def test_notebook_folds_a_dropdown_into_details():
    notebooks = _notebooks_module()
    markdown = ("Before.\n\n.. dropdown:: Show a solution\n\n   .. literalinclude:: a.py\n"
                "      :language: python\n\nAfter.\n")
    assert notebooks.fold_dropdowns(markdown) == (
        "Before.\n\n<details><summary>Show a solution</summary>\n\n"
        ".. literalinclude:: a.py\n   :language: python\n\n</details>\n\nAfter.\n")


def test_notebook_states_an_automodule_by_its_docstring():
    notebooks = _notebooks_module()
    markdown = ".. automodule:: json.tool\n   :no-index:\n\nNext."
    import json.tool

    expected = json.tool.__doc__.strip()
    assert notebooks.inline_automodules(markdown) == expected + "\n\nNext."


@pytest.mark.parametrize("markdown,plain", [
    ("see `the first lesson\n<sphx_glr_x.py>` now", "see the first lesson now"),
    ("keep ``code <b>`` and `a <b c>`", "keep ``code <b>`` and `a <b c>`"),
], ids=["reference", "code_and_text_with_spaces_kept"])
def test_notebook_keeps_the_text_of_a_half_converted_reference(markdown, plain):
    assert _notebooks_module().plain_references(markdown) == plain


@pytest.mark.parametrize("text, summary", [
    pytest.param("Every launch needs a grid: how many programs to start. More here.",
                 "Every launch needs a grid: how many programs to start.", id="colon_inside"),
    pytest.param("Two sentences. The second.", "Two sentences.", id="full_stop"),
    pytest.param("Line one\nwraps here? Next.", "Line one wraps here?", id="wrapped_question"),
    pytest.param("Ends in a colon:\n\n    code", "Ends in a colon.", id="paragraph_ends_in_colon"),
    pytest.param("No full stop", "No full stop", id="no_full_stop"),
])
def test_lesson_summary_is_the_first_sentence(text, summary):
    sys.path.insert(0, str(EXTENSIONS))
    try:
        from lessons import _first_sentence
    finally:
        sys.path.remove(str(EXTENSIONS))
    assert _first_sentence(text) == summary
