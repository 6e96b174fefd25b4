"""Which of the two execution modes is in force, and what follows from it.

Triton kernels run natively when PyTorch sees a CUDA GPU. Without one, the package switches
to the Triton interpreter (``TRITON_INTERPRET=1``), which runs every program of a launch on
the CPU through numpy: slow, but exact enough to check a kernel's indexing and arithmetic.

Every decision that depends on the mode (problem sizes, which device tensors live on,
whether a timing means anything) goes through :func:`interpreting` or :func:`pick`.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import TypeVar

import torch

_log = logging.getLogger("triton_guide")
T = TypeVar("T")

# The decision is taken once, at import. ``triton.jit`` reads TRITON_INTERPRET each time it
# decorates a function, so every kernel defined after this runs as the mode says.
_REQUESTED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_HAS_GPU = torch.cuda.is_available()
_INTERPRETING = _REQUESTED or not _HAS_GPU


def _interpret_imported_triton() -> int:
    """Make the Triton library functions that were decorated before TRITON_INTERPRET was
    set (``tl.max``, ``tl.sum``, ``tl.softmax``, ... when triton was imported first) run in
    the interpreter, as they would had it been set then; return how many were converted.

    ``triton.jit`` made each of them a ``JITFunction``, which only a compiled kernel can
    call ("Cannot call @triton.jit'd outside of the scope of a kernel"); under
    TRITON_INTERPRET it makes an ``InterpretedFunction`` of the same Python function. This
    swaps one for the other wherever the library keeps them: in the namespaces of the
    ``triton.language`` modules, and on ``tl.tensor`` for those that are also methods
    (``x.sum()``), where, as Triton does for a function that is not a ``JITFunction``, a
    plain function forwards the call. A kernel of the caller's own, decorated before
    triton_guide was imported, stays a ``JITFunction``: define kernels after the import."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    # id -> (the JITFunction, kept alive so that its id stays its own; its replacement)
    converted: dict[int, tuple[JITFunction, InterpretedFunction]] = {}

    def interpreted(value):
        if type(value) is not JITFunction:  # not autotuners or heuristics, which wrap one
            return None
        if id(value) not in converted:
            converted[id(value)] = (value, InterpretedFunction(value.fn))
        return converted[id(value)][1]

    modules = [module for name, module in list(sys.modules.items())
               if module is not None and (name == "triton.language"
                                          or name.startswith("triton.language."))]
    for module in modules:
        for name, value in list(vars(module).items()):
            function = interpreted(value)
            if function is not None:
                setattr(module, name, function)
    core = sys.modules.get("triton.language.core")
    for name, value in list(vars(core.tensor).items()) if core is not None else []:
        function = interpreted(value)
        if function is not None:
            setattr(core.tensor, name, lambda *args, _function=function, **kwargs:
                    _function(*args, **kwargs))
    return len(converted)


# A process that only compiles kernels for a named GPU, and never launches one
# (triton_guide.compiled starts such a process), sets TRITON_GUIDE_COMPILE_ONLY=1: its kernels
# stay compiled functions without a GPU, while everything else behaves as under the interpreter.
_COMPILE_ONLY = os.environ.get("TRITON_GUIDE_COMPILE_ONLY", "0") == "1"

if _INTERPRETING and not _COMPILE_ONLY:
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton.language" in sys.modules:  # triton was imported first
        _interpret_imported_triton()
    if not _REQUESTED:
        _log.warning(
            "triton_guide: no CUDA GPU found, so kernels run in the Triton interpreter "
            "(TRITON_INTERPRET=1) on the CPU, with small problem sizes; timings are not "
            "performance."
        )


def _release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as "3.6.0" or "2.4.0rc1"."""
    numbers = [int(part) for part in re.findall(r"\d+", version)[:2]]
    return tuple(numbers + [0] * (2 - len(numbers)))


def numpy_conflict(triton_version: str, numpy_version: str) -> str | None:
    """Why Triton's interpreter cannot run every kernel with this numpy, or None.

    Triton 3.6's interpreter converts one-element arrays to integers in a way that numpy
    2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars", wherever
    a kernel's value stands where Python needs an integer, a loop bound say); numpy 2.3
    only warns. Measured
    with this package's tests: triton 3.6.0 passes with numpy 2.3.5 and fails with 2.4.6;
    3.7.1, 3.8.0 and 3.9.0 pass with 2.4.6.
    """
    if _release(triton_version) < (3, 7) and _release(numpy_version) >= (2, 4):
        return (f"triton {triton_version}'s interpreter fails on numpy {numpy_version} "
                "(\"only 0-dimensional arrays can be converted to Python scalars\") in "
                "kernels whose values Python must read, such as loop bounds. Install numpy "
                "older than 2.4 (pip install \"numpy<2.4\"), or triton 3.7 or later.")
    return None


def _versions() -> tuple[str, str]:
    """The installed triton's and numpy's versions, without importing triton (which must
    see TRITON_INTERPRET first)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("triton"), version("numpy")
    except PackageNotFoundError:
        return "0", "0"  # not installed as a distribution: nothing to compare


# Said only where this process interprets: on a GPU the kernels run natively, and the
# pages that run the interpreter there do it in processes of their own, which say it.
_CONFLICT = numpy_conflict(*_versions())
if _CONFLICT and _INTERPRETING:
    _log.warning("triton_guide: %s", _CONFLICT)


def interpreting() -> bool:
    """True when kernels run in the Triton interpreter rather than on a GPU."""
    return _INTERPRETING


_DEVICE = torch.device("cpu") if _INTERPRETING else torch.device("cuda")


def device() -> torch.device:
    """The device that kernel inputs must live on in the current mode."""
    return _DEVICE


def pick(*, interpreter: T, gpu: T) -> T:
    """Return ``interpreter`` under the interpreter and ``gpu`` on a GPU.

    Used for problem sizes: ``n = pick(interpreter=1000, gpu=2**24)``.
    """
    return interpreter if _INTERPRETING else gpu


def timings_meaningful() -> bool:
    """Whether wall-clock timings of kernels say anything about performance."""
    return not _INTERPRETING


def describe() -> str:
    """One line naming the hardware and the software versions in use."""
    import triton

    if _INTERPRETING:
        where = "Triton interpreter on the CPU (no GPU timings)"
    else:
        where = torch.cuda.get_device_name()
    return f"{where}; triton {triton.__version__}; torch {torch.__version__}"
