"""Make the downloadable notebooks readable on their own.

sphinx-gallery turns a page's text cells into Markdown, but leaves RST directives as raw
text: a ``.. literalinclude:: /../triton_guide/softmax.py`` with ``:pyobject:`` would reach
the notebook reader as that line, not as the kernel. After the gallery is generated, this
extension replaces each such directive in the notebooks by the code it shows on the site
(read with Sphinx's own ``LiteralIncludeReader``, so ``:pyobject:``, ``:start-at:``,
``:lines:`` ... select the same lines), as a fenced Python block, and refreshes the zip
sphinx-gallery made of the page. The exercise pages use three more constructs that would
reach a notebook raw: ``.. automodule::`` (the statement, the module's docstring) becomes
that docstring, ``.. dropdown::`` (a folded solution) becomes an HTML ``<details>`` block,
which Jupyter also shows folded, and a cross-reference left as ```text <target>``` becomes
its text. The rewrite is idempotent: a processed notebook has no directive left.

The first cell, which installs the package, comes from sphinx-gallery's
``first_notebook_cell`` option in ``conf.py``; ``downloads.py``, which runs before this
extension, writes each notebook afresh and turns the kernels it includes into code cells.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

_DIRECTIVE = re.compile(
    r"^(?P<indent>[ \t]*)\.\.[ \t]+literalinclude::[ \t]*(?P<target>\S+)[ \t]*\n"
    r"(?P<options>(?:(?P=indent)[ \t]+:[\w-]+:.*\n?)*)",
    re.MULTILINE,
)
_OPTION = re.compile(r"^\s*:(?P<name>[\w-]+):[ \t]*(?P<value>.*)$")
_AUTOMODULE = re.compile(
    r"^(?P<indent>[ \t]*)\.\.[ \t]+automodule::[ \t]*(?P<module>[\w.]+)[ \t]*\n"
    r"(?:(?P=indent)[ \t]+:[\w-]+:.*\n?)*",
    re.MULTILINE,
)
# The directive line, then its body: blank lines and lines indented deeper than it.
_DROPDOWN = re.compile(
    r"^(?P<indent>[ \t]*)\.\.[ \t]+dropdown::[ \t]*(?P<title>.*)\n"
    r"(?P<body>(?:(?:(?P=indent)[ \t]+.*)?\n)*)",
    re.MULTILINE,
)
# What sphinx-gallery leaves of :ref:`text <target>` (the role gone, the target kept).
_LEFT_REFERENCE = re.compile(r"`(?P<text>[^`<>]+?)\s*<(?P<target>[^`<>\s]+)>`(?!`)")


def included_code(target: str, options: dict[str, str], srcdir: Path, page_dir: Path, config):
    """The lines a ``literalinclude`` of ``target`` with ``options`` shows."""
    from sphinx.directives.code import LiteralIncludeReader

    base = srcdir if target.startswith("/") else page_dir
    filename = (base / target.lstrip("/")).resolve()
    opts: dict[str, object] = dict(options)
    if "dedent" in opts:
        opts["dedent"] = int(opts["dedent"]) if opts["dedent"] else None
    text, _ = LiteralIncludeReader(str(filename), opts, config).read()
    return text


def inline_literalincludes(markdown: str, srcdir: Path, page_dir: Path, config) -> str:
    def replace(match: re.Match) -> str:
        options = {}
        for line in match.group("options").splitlines():
            option = _OPTION.match(line)
            if option:
                options[option.group("name")] = option.group("value").strip()
        code = included_code(match.group("target"), options, srcdir, page_dir, config)
        language = options.get("language", "python")
        return f"```{language}\n{code.rstrip()}\n```\n"

    return _DIRECTIVE.sub(replace, markdown)


def inline_automodules(markdown: str) -> str:
    """Each ``.. automodule::`` replaced by the module's docstring, as the page shows it."""
    import importlib
    import inspect

    def replace(match: re.Match) -> str:
        docstring = inspect.getdoc(importlib.import_module(match.group("module"))) or ""
        return docstring.strip() + "\n"

    return _AUTOMODULE.sub(replace, markdown)


def fold_dropdowns(markdown: str) -> str:
    """Each ``.. dropdown::`` replaced by a ``<details>`` block holding its body."""
    import textwrap

    def replace(match: re.Match) -> str:
        body = textwrap.dedent(match.group("body")).strip("\n")
        return (f"<details><summary>{match.group('title').strip()}</summary>\n\n{body}\n\n"
                "</details>\n\n")

    return _DROPDOWN.sub(replace, markdown)


def plain_references(markdown: str) -> str:
    """```text <target>``` (a cross-reference sphinx-gallery left half-converted) -> text."""
    return _LEFT_REFERENCE.sub(lambda match: match.group("text"), markdown)


def process_notebook(path: Path, srcdir: Path, config) -> bool:
    """Inline the directives of the notebook at ``path``; return whether it changed."""
    original = path.read_text(encoding="utf-8")
    notebook = json.loads(original)
    for cell in notebook["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        new = plain_references(inline_automodules(fold_dropdowns(text)))
        if "literalinclude::" in new:
            new = inline_literalincludes(new, srcdir, path.parent, config)
        if new != text:
            cell["source"] = [new]
    updated = json.dumps(notebook, indent=2)
    if updated == original:
        return False
    path.write_text(updated, encoding="utf-8")
    return True


def refresh_zip(zip_path: Path, replaced: Path) -> None:
    """Put the current ``replaced`` file into ``zip_path`` in place of its old copy."""
    if not zip_path.is_file():
        return
    with zipfile.ZipFile(zip_path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            if Path(info.filename).name == replaced.name:
                data = replaced.read_bytes()
            archive.writestr(info, data)


def process_gallery(gallery_dir: Path, srcdir: Path, config) -> list[Path]:
    changed = []
    for notebook in sorted(Path(gallery_dir).rglob("*.ipynb")):
        if process_notebook(notebook, srcdir, config):
            refresh_zip(notebook.with_suffix(".zip"), notebook)
            changed.append(notebook)
    return changed


def _on_builder_inited(app) -> None:
    galleries = app.config.sphinx_gallery_conf.get("gallery_dirs", [])
    galleries = [galleries] if isinstance(galleries, str) else list(galleries)
    for gallery in galleries:
        process_gallery(Path(app.srcdir) / gallery, Path(app.srcdir), app.config)


def setup(app):
    # after sphinx-gallery's generate_gallery_rst (builder-inited, priority 500)
    app.connect("builder-inited", _on_builder_inited, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
