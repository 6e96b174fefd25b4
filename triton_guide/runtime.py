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
import sys
from typing import TypeVar

import torch

_log = logging.getLogger("triton_guide")
T = TypeVar("T")

# The decision is taken once, at import, before any ``@triton.jit`` function is defined:
# ``triton.jit`` reads TRITON_INTERPRET when it decorates a function.
_REQUESTED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
_HAS_GPU = torch.cuda.is_available()
_INTERPRETING = _REQUESTED or not _HAS_GPU

if _INTERPRETING and not _REQUESTED:
    if "triton" in sys.modules:
        # Triton's own library functions (tl.max, tl.sum, tl.softmax, ...) were decorated
        # for the GPU when triton was imported; an interpreted kernel that calls them fails.
        _log.warning(
            "triton_guide: triton was imported before triton_guide, with no GPU here; "
            "kernels that call tl.max, tl.sum or other Triton library functions will fail "
            "with \"Cannot call @triton.jit'd outside of the scope of a kernel\". Import "
            "triton_guide first, or set TRITON_INTERPRET=1 before starting Python."
        )
    os.environ["TRITON_INTERPRET"] = "1"
    _log.warning(
        "triton_guide: no CUDA GPU found, so kernels run in the Triton interpreter "
        "(TRITON_INTERPRET=1) on the CPU, with small problem sizes; timings are not "
        "performance."
    )


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
