"""Re-execute a gallery page when package code it uses changes, not only its own file.

sphinx-gallery skips a page whose source has the MD5 stored next to its output
(``<gallery>/<section>/<page>.py.md5``). That key ignores the package the page imports, so
after an edit to a kernel module the site would keep showing output of code that no longer
exists. This extension, run before the gallery is generated, adds the package to the key:

* it reads each page with :mod:`ast` and collects the package modules the page uses: the
  package's ``__init__`` as soon as the page imports the package, every module it names
  (``import pkg.mod``, ``from pkg.mod import f``, ``from pkg import mod``), the module that
  defines a name re-exported by ``__init__`` (``from pkg import f``, ``pkg.f``), and the
  files its ``.. literalinclude::`` directives show; then, transitively, the package
  modules those modules import;
* it hashes the contents of those files and compares the hash with the one stored in
  ``<gallery>/<section>/<page>.py.deps.json`` by the previous build;
* when they differ, it deletes the page's ``.md5`` file, so sphinx-gallery runs the page
  again, and stores the new hash.

A rebuild in which nothing changed deletes nothing, so it executes no page.

Configuration (``conf.py``): ``page_deps_package = "triton_guide"`` and
``page_deps_package_dir = "<path to the package folder>"``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

DEPS_SUFFIX = ".deps.json"
_LITERALINCLUDE = re.compile(r"^\s*#?\s*\.\.\s+literalinclude::\s*(\S+)", re.MULTILINE)


def _module_file(package_dir: Path, dotted: str) -> Path | None:
    """The file of ``package.sub.mod`` (dotted path below the package), if it exists."""
    parts = dotted.split(".") if dotted else []
    as_module = package_dir.joinpath(*parts).with_suffix(".py") if parts else None
    if as_module is not None and as_module.is_file():
        return as_module
    as_package = package_dir.joinpath(*parts, "__init__.py")
    return as_package if as_package.is_file() else None


def _relative_imports(tree: ast.AST, package: str, current: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` pairs, below the package, for each import of the package."""
    found = []
    base = current.split(".")[:-1] if current else []  # the module's own package
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    found.append((alias.name[len(package) + 1 :], []))
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            if node.level:  # relative import inside the package
                anchor = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join(anchor + ([node.module] if node.module else []))
                found.append((module, names))
            elif node.module == package or (node.module or "").startswith(package + "."):
                found.append((node.module[len(package) + 1 :], names))
    return found


class PackageIndex:
    """Which files of a package a piece of code depends on, found statically."""

    def __init__(self, package: str, package_dir: Path):
        self.package = package
        self.package_dir = Path(package_dir).resolve()
        self._trees: dict[Path, ast.AST] = {}

    def _tree(self, path: Path) -> ast.AST:
        if path not in self._trees:
            self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        return self._trees[path]

    def _dotted(self, path: Path) -> str:
        parts = list(path.relative_to(self.package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1] + ["__init__"]
        return ".".join(parts)

    def _defining_module(self, module: str, name: str) -> Path | None:
        """The file that defines ``name`` as seen from package module ``module``."""
        submodule = _module_file(self.package_dir, f"{module}.{name}" if module else name)
        if submodule is not None and submodule.name != "__init__.py":
            return submodule
        init = _module_file(self.package_dir, module)
        if init is None or init.name != "__init__.py":
            return None
        current = f"{module}.__init__" if module else "__init__"
        for source, names in _relative_imports(self._tree(init), self.package, current):
            if name in names:
                return _module_file(self.package_dir, source)
        return None

    def _direct(self, tree: ast.AST, current: str) -> set[Path]:
        files: set[Path] = set()
        for module, names in _relative_imports(tree, self.package, current):
            target = _module_file(self.package_dir, module)
            if target is not None:
                files.add(target)
            for name in names:
                defining = self._defining_module(module, name)
                if defining is not None:
                    files.add(defining)
        return files

    def _attribute_uses(self, tree: ast.AST) -> set[Path]:
        """Files behind ``pkg.name`` attribute uses after ``import pkg``."""
        files = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == self.package
            ):
                defining = self._defining_module("", node.attr)
                if defining is not None:
                    files.add(defining)
        return files

    def closure(self, files: set[Path]) -> set[Path]:
        """``files`` and every package file they import, transitively."""
        todo, seen = list(files), set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            if path.name == "__init__.py":
                continue  # importing the package runs it, but a page uses what it names
            todo.extend(self._direct(self._tree(path), self._dotted(path)) - seen)
        return seen

    def page_dependencies(self, page: Path, srcdir: Path | None = None) -> list[Path]:
        """Package files (and included files) the page at ``page`` depends on, sorted."""
        text = page.read_text(encoding="utf-8")
        tree = ast.parse(text, str(page))
        files = self._direct(tree, "") | self._attribute_uses(tree)
        files = self.closure(files)
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
