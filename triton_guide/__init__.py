"""Triton kernels for learning: each op with its torch reference and a checked launcher.

Importing the package decides how kernels run: natively on a CUDA GPU, or, without one,
in the Triton interpreter on the CPU (see :mod:`triton_guide.runtime`).
"""

from . import runtime  # first: it sets TRITON_INTERPRET before any kernel is defined
from .attention import attention, attention_reference
from .cross_entropy import cross_entropy, cross_entropy_reference
from .matmul import matmul, matmul_reference
from .norms import layer_norm, layer_norm_reference, rms_norm, rms_norm_reference
from .reduction import vector_sum, vector_sum_reference
from .softmax import softmax, softmax_naive, softmax_reference
from .transpose import transpose, transpose_reference
from .vector_add import vector_add, vector_add_reference

__all__ = [
    "attention",
    "attention_reference",
    "cross_entropy",
    "cross_entropy_reference",
    "layer_norm",
    "layer_norm_reference",
    "matmul",
    "matmul_reference",
    "rms_norm",
    "rms_norm_reference",
    "runtime",
    "softmax",
    "softmax_naive",
    "softmax_reference",
    "transpose",
    "transpose_reference",
    "vector_add",
    "vector_add_reference",
    "vector_sum",
    "vector_sum_reference",
]
__version__ = "0.1.0"
