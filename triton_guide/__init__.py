"""Triton kernels for learning: each op with its torch reference and a checked launcher.

Importing the package decides how kernels run: natively on a CUDA GPU, or, without one,
in the Triton interpreter on the CPU (see :mod:`triton_guide.runtime`). The ops are the ones
their modules declare in :mod:`triton_guide.registry`; each is exported here with its
reference (``triton_guide.softmax``, ``triton_guide.softmax_reference``).
"""

from . import runtime  # first: it sets TRITON_INTERPRET before any kernel is defined
from . import registry

for _op in registry.load().values():
    globals()[_op.name] = _op.call
    globals()[f"{_op.name}_reference"] = _op.reference
del _op

from .softmax import softmax_naive  # noqa: E402  (the page's naive version, not an op)

__all__ = sorted([name for op in registry.OPS for name in (op, f"{op}_reference")]
                 + ["registry", "runtime", "softmax_naive"])
__version__ = "0.1.0"
