"""Which files of a package a page uses, found by reading its imports (nothing is run).

Two users ask this of the same analysis: the results store (:mod:`triton_guide.results`)
hashes a page's kernel source to tell a stale recording, leaving out the shared machinery;
the site's ``docs/_ext/page_deps.py`` re-runs a page when any package file it uses changes.
The rules, for a page:

* ``import pkg`` (or ``import pkg as tg``) uses the package's ``__init__``; afterwards each
  ``pkg.name`` (``tg.name``) uses the module that defines ``name``;
* ``from pkg import name`` uses ``__init__`` and the module that defines ``name``: the
  submodule ``pkg/name.py`` if there is one, else the module ``__init__`` imports it from;
* ``import pkg.mod`` and ``from pkg.mod import name`` use ``pkg/mod.py`` (for a
  subpackage, its ``__init__`` and the module that defines ``name`` in it);

then, transitively, every package module that a used module imports (relative imports at
any depth, or absolute ones of the package). An ``__init__`` is used but not followed:
importing the package runs it, but a page uses only what it names.

``exclude`` leaves modules out, by dotted name below the package (``"runtime"``, or
``"benchmark"`` for a subpackage and everything in it; ``"__init__"`` is the package's own):
an excluded module is neither listed nor followed.

This module imports nothing from the package, so that the docs extension can load it on
its own (without torch or triton).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path


def module_file(package_dir: Path, dotted: str) -> Path | None:
    """The file of module ``dotted`` below the package (``""`` is its ``__init__``), if any."""
    parts = dotted.split(".") if dotted else []
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if parts:
        as_module = package_dir.joinpath(*parts).with_suffix(".py")
        if as_module.is_file():
            return as_module
    as_package = package_dir.joinpath(*parts, "__init__.py")
    return as_package if as_package.is_file() else None


class PackageImports:
    """The import analysis of one package, ``package_dir`` (its name is the folder's)."""

    def __init__(self, package_dir: Path, package: str | None = None):
        self.package_dir = Path(package_dir).resolve()
        self.package = package or self.package_dir.name
        self._trees: dict[Path, ast.AST] = {}

    # -- reading ----------------------------------------------------------------------------

    def _tree(self, path: Path) -> ast.AST:
        if path not in self._trees:
            self._trees[path] = ast.parse(path.read_text(encoding="utf-8"), str(path))
        return self._trees[path]

    def dotted(self, path: Path) -> str:
        """``pkg/exercises/checker.py`` -> ``exercises.checker``; ``pkg/__init__.py`` ->
        ``__init__``; ``pkg/exercises/__init__.py`` -> ``exercises.__init__``."""
        return ".".join(path.relative_to(self.package_dir).with_suffix("").parts)

    def _imports(self, tree: ast.AST, current: str | None) -> tuple[list, set[str]]:
        """``(module, names)`` for each import of the package in ``tree`` (``module`` dotted
        below the package, ``""`` for the package itself), and the local names bound to the
        package. ``current`` is the dotted name of the module read (None for a page)."""
        found, aliases = [], set()
        package = self.package
        base = current.split(".")[:-1] if current else []  # the module's own package
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package:
                        found.append(("", []))
                        aliases.add(alias.asname or package)
                    elif alias.name.startswith(package + "."):
                        found.append((alias.name[len(package) + 1:], []))
                        if alias.asname is None:  # ``import pkg.mod`` binds ``pkg``
                            found.append(("", []))
                            aliases.add(package)
            elif isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
                if node.level and current is not None:  # relative, inside the package
                    anchor = base[:len(base) - (node.level - 1)]
                    found.append((".".join(anchor + ([node.module] if node.module else [])),
                                  names))
                elif node.level == 0 and node.module == package:
                    found.append(("", names))
                elif node.level == 0 and (node.module or "").startswith(package + "."):
                    found.append((node.module[len(package) + 1:], names))
        return found, aliases

    def _defining_file(self, module: str, name: str) -> Path | None:
        """The file that defines ``name`` as imported from package module ``module``: the
        submodule ``module.name`` if there is one, else, if ``module`` is a (sub)package,
        the module its ``__init__`` imports ``name`` from."""
        submodule = module_file(self.package_dir, f"{module}.{name}" if module else name)
        if submodule is not None:
            return submodule
        init = module_file(self.package_dir, module)
        if init is None or init.name != "__init__.py":
            return None
        current = self.dotted(init)
        for source, names in self._imports(self._tree(init), current)[0]:
            if name in names:
                return module_file(self.package_dir, source)
        return None

    def direct(self, tree: ast.AST, current: str | None = None) -> set[Path]:
        """The package files that the code in ``tree`` uses directly."""
        files: set[Path] = set()
        found, aliases = self._imports(tree, current)
        for module, names in found:
            target = module_file(self.package_dir, module)
            if target is not None:
                files.add(target)
            for name in names:
                defining = self._defining_file(module, name)
                if defining is not None:
                    files.add(defining)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases):
                defining = self._defining_file("", node.attr)
                if defining is not None:
                    files.add(defining)
        return files

    # -- following --------------------------------------------------------------------------

    def excluded(self, path: Path, exclude: Iterable[str]) -> bool:
        """Whether ``path`` is one of the ``exclude`` modules or inside one of them."""
        parts = self.dotted(path).split(".")
        exclude = set(exclude)
        return any(".".join(parts[:i]) in exclude for i in range(1, len(parts) + 1))

    def closure(self, files: Iterable[Path], exclude: Iterable[str] = ()) -> set[Path]:
        """``files`` and every package file they import, transitively, less ``exclude``."""
        exclude = frozenset(exclude)
        todo, seen = list(files), set()
        while todo:
            path = todo.pop()
            if path in seen or self.excluded(path, exclude):
                continue
            seen.add(path)
            if path.name == "__init__.py":
                continue  # importing the package runs it, but a page uses what it names
            todo.extend(self.direct(self._tree(path), self.dotted(path)) - seen)
        return seen

    def used_by(self, source: str, exclude: Iterable[str] = (), filename: str = "<page>"
                ) -> list[Path]:
        """The package files that a page (its ``source``) uses, sorted."""
        return sorted(self.closure(self.direct(ast.parse(source, filename)), exclude))
