"""How float32 operands of ``tl.dot`` are multiplied: PyTorch's float32 matmul setting decides.

``torch.get_float32_matmul_precision()`` says how much of float32's accuracy PyTorch's own
float32 matrix products keep: "highest" (the default: float32 throughout), "high" (TF32
allowed) or "medium" (bfloat16 allowed). The package's float32 ``tl.dot`` calls follow it
through their ``input_precision``, which Triton 3.6 accepts for NVIDIA GPUs as "tf32",
"tf32x3", "ieee", "bf16x3" or "bf16x6" (the interpreter: "tf32", "tf32x3", "ieee"):

* "tf32": one tensor-core product on operands cut to TF32 (10 of float32's 23 fraction
  bits, up to about 5e-4 relative each). The fastest.
* "tf32x3": each operand split into a TF32 part and a TF32 remainder, and three
  tensor-core products summed (big x big, big x small, small x big); only small x small,
  about 2^-22 of the product, is left out. Close to float32's accuracy, for about three
  times the tensor-core work of "tf32".
* "ieee": no tensor cores: fused multiply-adds on the CUDA cores, float32 exactly, whose
  peak on an H100 SXM is 67 TFLOP/s against TF32 tensor cores' 495 (NVIDIA's figures).
* "bf16x3" / "bf16x6": bfloat16 splits in three or six products (about 16 bits, or about
  float32's, on bfloat16 tensor cores).

"highest" takes "tf32x3": about float32's accuracy at tensor-core speed ("ieee" keeps the
last two or so bits too, at a fraction of the speed). "high" takes "tf32", as PyTorch's own CUDA matmul does. "medium"
allows bfloat16, but Triton has no one-product bfloat16 mode for float32 operands, and
every split mode costs more than "tf32", so it takes "tf32" too (PyTorch's CUDA matmul also
runs "medium" as TF32). Each value is a ``tl.constexpr`` of the kernels that use it, so each
setting compiles its own kernel. Under the interpreter ``tl.dot`` multiplies float32
exactly whatever the value.
"""

from __future__ import annotations

import torch

# torch.get_float32_matmul_precision() -> tl.dot input_precision for float32 operands.
DOT_INPUT_PRECISION = {"highest": "tf32x3", "high": "tf32", "medium": "tf32"}
# What tl.dot is given for 16-bit operands: Triton's default, which only float32 operands
# read; passing it keeps one compiled kernel per 16-bit dtype whatever the setting.
UNUSED_FOR_16_BIT = "tf32"


# torch.backends.cuda.matmul.fp32_precision's own getter (PyTorch 2.9 on): the attribute
# goes through a module __getattr__ that costs several times as much, on every float32
# matmul call.
_fp32_precision_getter = getattr(torch._C, "_get_fp32_precision_getter", None)


def _cuda_matmul_setting() -> str:
    """torch.backends.cuda.matmul.fp32_precision: "ieee", "tf32" or "none" (not set; also
    the answer of a PyTorch without the setting)."""
    if _fp32_precision_getter is not None:
        return _fp32_precision_getter("cuda", "matmul")
    return getattr(torch.backends.cuda.matmul, "fp32_precision", "none")


def float32_matmul_precision() -> str:
    """PyTorch's float32 matmul setting, as its CUDA matmul reads it: "highest", "high" or
    "medium".

    PyTorch 2.9 added a per-backend setting, ``torch.backends.cuda.matmul.fp32_precision``
    ("ieee", "tf32", or "none" where nothing was set), which wins over
    ``torch.get_float32_matmul_precision()`` where both were set; and where they were
    mixed, ``torch.get_float32_matmul_precision()`` raises, or still returns the older
    value. So the backend's "ieee" is read as "highest" and its "tf32" as "high" (or
    "medium" if that is what the older setting says); otherwise the older setting decides.
    """
    backend = _cuda_matmul_setting()
    try:
        legacy = torch.get_float32_matmul_precision()
    except RuntimeError:  # the two settings were mixed
        legacy = None
    if backend == "ieee":
        return "highest"
    if backend == "tf32":
        return legacy if legacy in ("high", "medium") else "high"
    return legacy or "highest"


def dot_input_precision(dtype: torch.dtype) -> str:
    """The ``input_precision`` for ``tl.dot`` on operands of ``dtype``: for float32, the one
    :data:`DOT_INPUT_PRECISION` gives for PyTorch's setting (read on every call); for 16-bit
    dtypes, which it does not affect, always the same."""
    if dtype != torch.float32:
        return UNUSED_FOR_16_BIT
    return DOT_INPUT_PRECISION[float32_matmul_precision()]
