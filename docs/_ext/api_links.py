"""Links to the API page for the names a package re-exports.

The API page documents each module with ``automodule``, so ``softmax`` is described as
``triton_guide.softmax.softmax``. Pages and docstrings call it by its short, public name,
``triton_guide.softmax`` (``__init__`` re-exports it). When a Python cross-reference finds
no target, this extension imports the name, asks the object where it was defined
(``__module__`` and ``__qualname__``) and resolves the reference to that description.
"""

from __future__ import annotations

import importlib


def _defined_at(target: str) -> str | None:
    module_name, _, attribute = target.rpartition(".")
    if not module_name:
        return None
    try:
        obj = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError):
        return None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname:
        return None
    defined = f"{module}.{qualname}"
    return defined if defined != target else None


def _on_missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    prefixes = tuple(f"{name}." for name in app.config.api_links_packages)
    if not target.startswith(prefixes):
        return None
    defined = _defined_at(target)
    if defined is None:
        return None
    domain = env.get_domain("py")
    node = node.deepcopy()
    node["reftarget"] = defined
    return domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], defined, node, contnode
    )


def setup(app):
    app.add_config_value("api_links_packages", [], "env")
    app.connect("missing-reference", _on_missing_reference)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
