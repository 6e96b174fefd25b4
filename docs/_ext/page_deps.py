"""Re-execute a gallery page when package code it uses changes, not only its own file.

sphinx-gallery skips a page whose source has the MD5 stored next to its output
(``<gallery>/<section>/<page>.py.md5``). That key ignores the package the page imports, so
after an edit to a kernel module the site would keep showing output of code that no longer
exists. This extension, run before the gallery is generated, adds the package to the key:

* it reads each page with :mod:`ast` and collects the package files the page uses, by the
  rules of ``triton_guide/page_imports.py`` (the same analysis the results store hashes a
  page's kernels with, here with nothing left out), plus the files its
  ``.. literalinclude::`` directives show;
* it hashes the contents of those files and compares the hash with the one stored in
  ``<gallery>/<section>/<page>.py.deps.json`` by the previous build;
* when they differ, it deletes the page's ``.md5`` file, so sphinx-gallery runs the page
  again, and stores the new hash.

A rebuild in which nothing changed deletes nothing, so it executes no page.

Configuration (``conf.py``): ``page_deps_package = "triton_guide"`` and
``page_deps_package_dir = "<path to the package folder>"``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from pathlib import Path

DEPS_SUFFIX = ".deps.json"
_LITERALINCLUDE = re.compile(r"^\s*#?\s*\.\.\s+literalinclude::\s*(\S+)", re.MULTILINE)
_ANALYSIS = Path(__file__).resolve().parents[2] / "triton_guide" / "page_imports.py"


def _page_imports():
    """``triton_guide/page_imports.py``, loaded from its file: importing it through the
    package would run the package's ``__init__`` (torch, triton) in every build, also for
    a site about another package."""
    name = "_page_deps_page_imports"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _ANALYSIS)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # before running it, as an import would
        spec.loader.exec_module(module)
    return sys.modules[name]


class PackageIndex:
    """Which files of a package a page depends on, found statically."""

    def __init__(self, package: str, package_dir: Path):
        self.package = package
        self.package_dir = Path(package_dir).resolve()
        self.imports = _page_imports().PackageImports(self.package_dir, package)

    def page_dependencies(self, page: Path, srcdir: Path | None = None) -> list[Path]:
        """Package files (and included files) the page at ``page`` depends on, sorted."""
        text = page.read_text(encoding="utf-8")
        files = set(self.imports.used_by(text, filename=str(page)))
        for target in _LITERALINCLUDE.findall(text):
            base = srcdir if target.startswith("/") and srcdir is not None else page.parent
            included = (base / target.lstrip("/")).resolve()
            if included.is_file():
                files.add(included)
        return sorted(files)


def dependency_hash(files: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in files:
        try:
            name = str(path.relative_to(root))
        except ValueError:
            name = str(path)
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def invalidate_stale_pages(
    examples_dir: Path, gallery_dir: Path, index: PackageIndex, srcdir: Path | None = None
) -> list[Path]:
    """Delete the stored MD5 of every page whose dependencies changed; return those pages.

    The new dependency hash of each page is stored next to its output, so that the next
    build compares against this one.
    """
    examples_dir, gallery_dir = Path(examples_dir), Path(gallery_dir)
    root = index.package_dir.parent
    invalidated = []
    for page in sorted(examples_dir.rglob("*.py")):
        if page.name == "__init__.py":
            continue
        out_dir = gallery_dir / page.parent.relative_to(examples_dir)
        files = index.page_dependencies(page, srcdir)
        record = {
            "hash": dependency_hash(files, root),
            "files": [
                str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
                for path in files
            ],
        }
        deps_file = out_dir / (page.name + DEPS_SUFFIX)
        md5_file = out_dir / (page.name + ".md5")
        previous = None
        if deps_file.is_file():
            try:
                previous = json.loads(deps_file.read_text(encoding="utf-8")).get("hash")
            except ValueError:
                previous = None
        if previous == record["hash"]:
            continue
        if md5_file.exists() and previous != record["hash"]:
            md5_file.unlink()
            invalidated.append(page)
        out_dir.mkdir(parents=True, exist_ok=True)
        deps_file.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return invalidated


def _on_builder_inited(app) -> None:
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    package = app.config.page_deps_package
    package_dir = app.config.page_deps_package_dir
    if not package or not package_dir:
        return
    index = PackageIndex(package, Path(package_dir))
    conf = app.config.sphinx_gallery_conf
    srcdir = Path(app.srcdir)
    examples = conf.get("examples_dirs", [])
    galleries = conf.get("gallery_dirs", [])
    examples = [examples] if isinstance(examples, str) else list(examples)
    galleries = [galleries] if isinstance(galleries, str) else list(galleries)
    for examples_dir, gallery_dir in zip(examples, galleries):
        stale = invalidate_stale_pages(
            (srcdir / examples_dir).resolve(), srcdir / gallery_dir, index, srcdir
        )
        for page in stale:
            logger.info(f"page_deps: {page.name} uses changed package code; re-running it")


def setup(app):
    app.add_config_value("page_deps_package", "", "env")
    app.add_config_value("page_deps_package_dir", "", "env")
    # before sphinx-gallery's generate_gallery_rst (builder-inited, priority 500)
    app.connect("builder-inited", _on_builder_inited, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
