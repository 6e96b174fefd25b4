"""Downloads that run on a fresh machine: the package served with the site, kernels as code.

Three things, all derived from one setting, the site's address (``html_baseurl``):

* **The package, published with the site.** After an HTML build, a wheel and an sdist of the
  package are built from the same source tree into ``<site>/dist/`` (the sdist first, then the
  wheel from the unpacked sdist, as ``python -m build`` does), with a ``dist/index.html``
  listing them. :func:`install_command` is the one command that installs that wheel; the
  ``{install-command}`` directive shows it on a page, and ``conf.py`` puts it in the first
  cell of every notebook.
* **Kernels as code.** A page shows a kernel with ``.. literalinclude:: /../pkg/mod.py`` and
  ``:pyobject: some_kernel``. In the downloaded script and notebook, each such directive that
  shows a whole ``@triton.jit`` function (also under ``triton.autotune`` /
  ``triton.heuristics``) becomes code: the same lines the site shows, the imports they need,
  and a call to ``triton_guide.local.use_local``, which makes the package's launchers run
  that copy. A reader who edits the kernel in the download and runs it again sees the
  effect. Other included code (a launcher's last lines, a whole exercise file) stays text:
  a comment in the script, a Markdown code block in the notebook (``notebooks.py``).
* **First lines.** Every downloaded script starts with comment lines giving the install
  command, and every notebook's first cell runs it.

sphinx-gallery copies each page to ``<gallery>/<section>/<page>.py`` (restoring the copy
from the source whenever the two differ) and writes the notebook only when the page runs.
After that (``builder-inited``, between sphinx-gallery and ``notebooks.py``), this extension
writes the notebook afresh from the pristine copy, with sphinx-gallery's own converter, so
that a page that did not run gets the current command and kernels too; then it rewrites
both, and refreshes the page's zip.

Configuration (``conf.py``): ``downloads_package`` (import name), ``downloads_dist_name``
(distribution name), ``downloads_version``, ``downloads_project_root`` (the folder with
``pyproject.toml``; empty: no distributions are built) and ``html_baseurl``.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import re
import shutil
import subprocess
import sys
import symtable
import tarfile
import tempfile
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from notebooks import _DIRECTIVE, _OPTION, included_code

SCRIPT_MARK = "# -- triton-guide download --"
CODE_MARK = "# -- as code --"
# Decorators that make a function a Triton kernel or a jit helper.
_KERNEL_DECORATORS = {"jit", "autotune", "heuristics"}
# Options that keep a literalinclude whole: anything else (start-at, lines, ...) shows a part.
_WHOLE_OPTIONS = {"pyobject", "language", "dedent", "caption", "name", "linenos",
                  "emphasize-lines"}


def wheel_filename(dist_name: str, version: str) -> str:
    """The pure-Python wheel's file name (the project name normalised as wheels spell it)."""
    return f"{re.sub(r'[-_.]+', '_', dist_name).lower()}-{version}-py3-none-any.whl"


def dist_url(site_url: str, dist_name: str, version: str) -> str:
    return f"{site_url.rstrip('/')}/dist/{wheel_filename(dist_name, version)}"


def install_command(site_url: str, dist_name: str, version: str) -> str:
    """``pip install <site>/dist/<wheel>``: the one command every page and download gives."""
    return f"pip install {dist_url(site_url, dist_name, version)}"


# -- which included code becomes code ------------------------------------------------------


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def is_triton_function(path: Path, name: str) -> bool:
    """Whether ``path`` defines, at top level, a function ``name`` decorated by Triton."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return any(_decorator_name(d) in _KERNEL_DECORATORS for d in node.decorator_list)
    return False


def free_names(code: str) -> list[str]:
    """Global names a top-level definition reads: in its decorators, defaults, annotations
    and body, without builtins and without the names it defines itself."""
    top = symtable.symtable(code, "<included>", "exec")
    defined = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    found: set[str] = {s.get_name() for s in top.get_symbols() if s.is_referenced()}

    def walk(table: symtable.SymbolTable) -> None:
        for child in table.get_children():
            for symbol in child.get_symbols():
                if symbol.is_global() and symbol.is_referenced():
                    found.add(symbol.get_name())
            walk(child)

    walk(top)
    return sorted(n for n in found - defined if not hasattr(builtins, n))


@dataclass
class Include:
    """One ``literalinclude`` of a page: what it shows, and whether that becomes code."""

    target: str
    options: dict[str, str]
    path: Path
    code: str  # the lines the site shows

    @property
    def as_code(self) -> bool:
        name = self.options.get("pyobject")
        return (bool(name) and set(self.options) <= _WHOLE_OPTIONS
                and is_triton_function(self.path, name))


def read_include(target: str, option_lines: str, srcdir: Path, page_dir: Path, config) -> Include:
    options = {}
    for line in option_lines.splitlines():
        line = line.lstrip("#")
        option = _OPTION.match(line)
        if option:
            options[option.group("name")] = option.group("value").strip()
    base = srcdir if target.startswith("/") else page_dir
    path = (base / target.lstrip("/")).resolve()
    return Include(target, options, path, included_code(target, options, srcdir, page_dir, config))


def module_name(path: Path, package_dir: Path) -> str:
    """``<root>/pkg/sub/mod.py`` -> ``pkg.sub.mod``."""
    relative = Path(path).resolve().relative_to(Path(package_dir).resolve().parent)
    parts = list(relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def code_block(include: Include, package_dir: Path, defined: set[str]) -> str:
    """The included kernel as code that runs in place of the package's own.

    ``defined`` holds the names earlier blocks of the same page defined: a kernel that calls
    a helper shown (and perhaps edited) above uses that one, not the package's. It also
    holds the import lines those blocks wrote (prefixed ``import:``), which are not
    repeated. What this block adds is added to ``defined``.
    """
    module = module_name(include.path, package_dir)
    loaded = importlib.import_module(module)
    code = include.code.rstrip() + "\n"
    name = include.options["pyobject"]
    imports, from_names = [], []
    for free in free_names(code):
        if free in defined:
            continue
        if not hasattr(loaded, free):
            raise ValueError(f"{name} in {module} uses {free!r}, which {module} does not define")
        value = getattr(loaded, free)
        if isinstance(value, ModuleType):
            imports.append(f"import {value.__name__}" if value.__name__ == free
                           else f"import {value.__name__} as {free}")
        else:
            from_names.append(free)
    package = module.split(".")[0]
    imports = sorted(imports)
    if from_names:
        imports.append(f"from {module} import {', '.join(from_names)}")
    imports.append(f"from {package}.local import use_local")
    imports = [line for line in imports if f"import:{line}" not in defined]
    defined.update(f"import:{line}" for line in imports)
    defined.add(name)
    lines = [
        CODE_MARK,
        f"# {name}, as in {module.replace('.', '/')}.py.",
        f"# {package} runs this copy from here on: an edit changes what the page computes.",
        *imports,
    ]
    return ("\n".join(lines) + "\n\n\n" + code + "\n\n"
            + f'use_local("{module}", {name})\n')


# -- the downloaded script ------------------------------------------------------------------

_SCRIPT_DIRECTIVE = re.compile(r"^#(?P<indent>[ \t]*)\.\.[ \t]+literalinclude::[ \t]*(?P<target>\S+)[ \t]*$")


def script_header(command: str, site_url: str, with_code: bool) -> str:
    lines = [
        SCRIPT_MARK,
        f"# A page of the triton-guide site ({site_url}) as a script. It needs the",
        "# triton_guide package built with that site:",
        "#",
        f"#     {command}",
        "#",
        "# Without a CUDA GPU, kernels run in Triton's interpreter on the CPU.",
    ]
    if with_code:
        lines.append("# The kernels the page shows are defined below as code: edit one and run again.")
    return "\n".join(lines) + "\n"


def rewrite_script(text: str, srcdir: Path, page_dir: Path, config, package_dir: Path,
                   header: tuple[str, str]) -> str:
    """The downloaded script: the header, kernels as code, other included code as comments."""
    if text.startswith(SCRIPT_MARK):
        return text
    lines = text.splitlines()
    out: list[str] = []
    defined: set[str] = set()
    any_code = False
    i = 0
    while i < len(lines):
        match = _SCRIPT_DIRECTIVE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group("indent")
        j = i + 1
        option_lines = []
        while j < len(lines) and re.match(rf"^#{re.escape(indent)}[ \t]+:[\w-]+:", lines[j]):
            option_lines.append(lines[j])
            j += 1
        try:
            include = read_include(match.group("target"), "\n".join(option_lines), srcdir,
                                   page_dir, config)
        except (OSError, ValueError):  # Sphinx reports the broken include on the page
            out += lines[i:j]
            i = j
            continue
        if include.as_code and not indent.strip(" ").startswith("\t") and len(indent) <= 1:
            # Close the comment block, put the code, reopen a text block for what follows.
            while out and out[-1].strip() == "#":
                out.pop()
            rest = j
            while rest < len(lines) and lines[rest].strip() == "#":
                rest += 1
            out += ["", "", code_block(include, package_dir, defined).rstrip("\n"), ""]
            if rest < len(lines) and lines[rest].startswith("#") and not lines[rest].startswith("# %%"):
                out += ["# %%"]
            else:
                out += [""]
            any_code = True
            i = rest
            continue
        body = textwrap.indent(include.code.rstrip("\n"), f"#{indent}    ", lambda _: True)
        out += [re.sub(r"#\s+$", "#", line) for line in body.splitlines()]
        i = j
    command, site_url = header
    return script_header(command, site_url, any_code) + "\n".join(out) + "\n"


# -- the downloaded notebook ----------------------------------------------------------------


def _markdown(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": [text]}


def _code(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {"collapsed": False},
            "outputs": [], "source": [text]}


def split_kernel_cells(cells: list[dict], srcdir: Path, page_dir: Path, config,
                       package_dir: Path) -> tuple[list[dict], bool]:
    """Each Markdown cell cut at the kernels it includes, each kernel a code cell between."""
    new_cells, defined, changed = [], set(), False
    for cell in cells:
        if cell["cell_type"] == "code" and CODE_MARK in "".join(cell["source"]):
            defined.update(re.findall(r"^use_local\(\"[\w.]+\", (\w+)\)$",
                                      "".join(cell["source"]), re.MULTILINE))
        if cell["cell_type"] != "markdown":
            new_cells.append(cell)
            continue
        text = "".join(cell["source"])
        start = 0
        for match in _DIRECTIVE.finditer(text):
            if match.group("indent"):
                continue
            try:
                include = read_include(match.group("target"), match.group("options"), srcdir,
                                       page_dir, config)
            except (OSError, ValueError):  # Sphinx reports the broken include on the page
                continue
            if not include.as_code:
                continue
            before = text[start:match.start()].strip("\n")
            if before.strip():
                new_cells.append(_markdown(before + "\n"))
            new_cells.append(_code(code_block(include, package_dir, defined)))
            start = match.end()
            changed = True
        rest = text[start:].strip("\n")
        if start == 0:
            new_cells.append(cell)
        elif rest.strip():
            new_cells.append(_markdown(rest + "\n"))
    return new_cells, changed


def rewrite_notebook(path: Path, srcdir: Path, config, package_dir: Path, first_cell: str) -> bool:
    original = path.read_text(encoding="utf-8")
    notebook = json.loads(original)
    cells, _ = split_kernel_cells(notebook["cells"], srcdir, path.parent, config, package_dir)
    first = _code(first_cell)
    if cells and cells[0]["cell_type"] == "code" and "pip install" in "".join(cells[0]["source"]):
        cells[0] = first
    else:
        cells.insert(0, first)
    notebook["cells"] = cells
    updated = json.dumps(notebook, indent=2)
    if updated == original:
        return False
    path.write_text(updated, encoding="utf-8")
    return True


def refresh_zip(zip_path: Path, *replaced: Path) -> None:
    """Put the current ``replaced`` files into ``zip_path`` in place of their old copies."""
    if not zip_path.is_file():
        return
    by_name = {path.name: path for path in replaced}
    with zipfile.ZipFile(zip_path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            path = by_name.get(Path(info.filename).name)
            archive.writestr(info, path.read_bytes() if path is not None else data)


def fresh_notebook(script: Path, gallery_conf: dict) -> dict:
    """The notebook sphinx-gallery makes of ``script`` (as in its ``generate_file_rst``)."""
    from sphinx_gallery import py_source_parser as parser
    from sphinx_gallery.notebook import jupyter_notebook

    _, blocks = parser.split_code_and_text_blocks(str(script))
    blocks = [parser.Block(label, parser.remove_ignore_blocks(content), line)
              for label, content, line in blocks]
    if gallery_conf.get("remove_config_comments"):
        blocks = [parser.Block(label, parser.remove_config_comments(content), line)
                  for label, content, line in blocks]
    if blocks and blocks[-1].content.isspace():
        blocks = blocks[:-1]
    return jupyter_notebook(blocks, gallery_conf, script.parent)


def process_gallery(gallery_dir: Path, srcdir: Path, config, package_dir: Path,
                    command: str, site_url: str, first_cell: str) -> None:
    for script in sorted(Path(gallery_dir).rglob("*.py")):
        if not (script.with_suffix(".rst")).is_file():
            continue  # not a gallery page (an __init__.py or a helper copied along)
        notebook = script.with_suffix(".ipynb")
        if notebook.is_file() and not script.read_text(encoding="utf-8").startswith(SCRIPT_MARK):
            notebook.write_text(json.dumps(fresh_notebook(script, config.sphinx_gallery_conf),
                                           indent=2), encoding="utf-8")
        text = script.read_text(encoding="utf-8")
        new = rewrite_script(text, srcdir, script.parent, config, package_dir,
                             (command, site_url))
        if new != text:
            script.write_text(new, encoding="utf-8")
        if notebook.is_file():
            rewrite_notebook(notebook, srcdir, config, package_dir, first_cell)
        refresh_zip(script.with_suffix(".zip"), script, notebook)


# -- the distributions ----------------------------------------------------------------------

_BUILD = """
import sys
import setuptools
if int(setuptools.__version__.split(".")[0]) < 77:
    sys.exit(f"setuptools {setuptools.__version__} is too old to build the package (its "
             "license is an SPDX string): pip install 'setuptools>=77' (in the docs extra)")
from setuptools import build_meta
hook, out = sys.argv[1], sys.argv[2]
print(getattr(build_meta, hook)(out))
"""


def build_distributions(project_root: Path, out_dir: Path) -> list[Path]:
    """An sdist of ``project_root`` and a wheel built from it, into ``out_dir``.

    The PEP 517 hooks of setuptools are called in a separate interpreter (the one running
    the build, so with its setuptools), which is what ``python -m build --no-isolation``
    does; the wheel is built from the unpacked sdist, so a file missing from the sdist is
    missing from the wheel too, and shows.
    """
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)

    def hook(name: str, cwd: Path, target: Path) -> Path:
        done = subprocess.run([sys.executable, "-c", _BUILD, name, str(target)], cwd=cwd,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed in {cwd}:\n{done.stdout[-2000:]}\n"
                               f"{done.stderr[-4000:]}")
        return target / done.stdout.strip().splitlines()[-1]

    sdist = hook("build_sdist", Path(project_root), out_dir)
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch, filter="data")
        (unpacked,) = [p for p in Path(scratch).iterdir() if p.is_dir()]
        wheel = hook("build_wheel", unpacked, out_dir)
    links = "\n".join(f'<a href="{p.name}">{p.name}</a><br>' for p in (wheel, sdist))
    (out_dir / "index.html").write_text(
        f"<!DOCTYPE html>\n<html><head><title>Distributions</title></head><body>\n"
        f"{links}\n</body></html>\n", encoding="utf-8")
    return [wheel, sdist]


# -- Sphinx ---------------------------------------------------------------------------------


def _settings(config) -> tuple[str, str, str]:
    site_url = config.html_baseurl or ""
    if not site_url:
        raise ValueError("downloads: html_baseurl (the site's address) is not set")
    command = install_command(site_url, config.downloads_dist_name, config.downloads_version)
    return site_url, command, config.downloads_first_cell or f"%{command}"


def _on_builder_inited(app) -> None:
    if not app.config.downloads_package_dir:
        return
    site_url, command, first_cell = _settings(app.config)
    galleries = app.config.sphinx_gallery_conf.get("gallery_dirs", [])
    galleries = [galleries] if isinstance(galleries, str) else list(galleries)
    for gallery in galleries:
        process_gallery(Path(app.srcdir) / gallery, Path(app.srcdir), app.config,
                        Path(app.config.downloads_package_dir), command, site_url, first_cell)


def _on_build_finished(app, exception) -> None:
    root = app.config.downloads_project_root
    if exception is not None or not root or app.builder.format != "html":
        return
    from sphinx.util import logging

    built = build_distributions(Path(root), Path(app.outdir) / "dist")
    expected = wheel_filename(app.config.downloads_dist_name, app.config.downloads_version)
    if built[0].name != expected:
        raise RuntimeError(f"downloads: the wheel is {built[0].name}, but the pages give "
                           f"{expected}: the version in conf.py and the package differ")
    logging.getLogger(__name__).info(f"downloads: {', '.join(p.name for p in built)} in dist/")


def setup(app):
    from docutils import nodes
    from sphinx.util.docutils import SphinxDirective

    class InstallCommand(SphinxDirective):
        """The ``pip install`` command for the package served with this site."""

        def run(self):
            _, command, _ = _settings(self.env.config)
            block = nodes.literal_block(command, command)
            block["language"] = "bash"
            return [block]

    app.add_config_value("downloads_package_dir", "", "env")
    app.add_config_value("downloads_dist_name", "", "env")
    app.add_config_value("downloads_version", "", "env")
    app.add_config_value("downloads_project_root", "", "env")
    app.add_config_value("downloads_first_cell", "", "env")
    app.add_directive("install-command", InstallCommand)
    # after sphinx-gallery's generate_gallery_rst (500), before notebooks.py (600)
    app.connect("builder-inited", _on_builder_inited, priority=550)
    app.connect("build-finished", _on_build_finished)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
