"""Run the package's launchers with a kernel defined outside the package.

A page downloaded from the site defines the kernels it shows as code of its own, so that a
reader can edit one and run the page again. The launchers in ``triton_guide`` look their
kernels up by name in their module's globals at every call (``vector_add_kernel[grid](...)``
reads ``triton_guide.vector_add.vector_add_kernel``), and a kernel finds the ``@triton.jit``
helpers it calls the same way. :func:`use_local` rebinds those names, in every loaded module
of the package that holds the original object, to the copy, so that from then on every
launch and every call from another kernel runs the copy.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["use_local"]

PACKAGE = __name__.rpartition(".")[0]


def _name_of(obj: object) -> str:
    """The name a function, a ``triton.jit`` kernel or an autotuner over one was defined as."""
    seen = obj
    for _ in range(4):  # Autotuner / Heuristics -> JITFunction -> the Python function
        name = getattr(seen, "__name__", None)
        if isinstance(name, str):
            return name
        seen = getattr(seen, "fn", None)
        if seen is None:
            break
    raise TypeError(f"use_local: cannot tell the name of {obj!r}; pass a function or a "
                    "triton.jit kernel (optionally under triton.autotune)")


def use_local(module: str, obj: object) -> int:
    """Make ``triton_guide`` use ``obj`` in place of the object of the same name in ``module``.

    ``module`` is the dotted name of the package module that defines the original (for
    example ``"triton_guide.vector_add"``). Every loaded module of the package whose global
    is that original object gets ``obj`` instead. Returns how many globals were rebound (0
    when ``obj`` already is the package's own).
    """
    if not isinstance(module, str) or not (module == PACKAGE or module.startswith(PACKAGE + ".")):
        raise ValueError(f"use_local: module must name a module of {PACKAGE} "
                         f"(like '{PACKAGE}.vector_add'), got {module!r}")
    name = _name_of(obj)
    source = importlib.import_module(module)
    if not hasattr(source, name):
        raise ValueError(f"use_local: {module} defines no {name!r}, so nothing in {PACKAGE} "
                         f"would run this {name}")
    original = getattr(source, name)
    if original is obj:
        return 0
    rebound = 0
    for loaded_name, loaded in list(sys.modules.items()):
        if loaded is None or not (loaded_name == PACKAGE or loaded_name.startswith(PACKAGE + ".")):
            continue
        for attribute, value in list(vars(loaded).items()):
            if value is original:
                setattr(loaded, attribute, obj)
                rebound += 1
    return rebound
