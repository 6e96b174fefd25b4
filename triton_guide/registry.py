"""The op contract: each op declares itself once, here, with :func:`register`.

An op module ends with one ``register(...)`` call per public op, giving its launcher, its
PyTorch reference, small example inputs, and two facts the tests and pages need: whether
autograd can differentiate it (the launcher goes through a :class:`~triton_guide.library.Operator`
with a backward) and whether ``torch.compile`` can capture it whole (the Operator's registered
PyTorch operator). The package's ``__init__`` imports the modules in :data:`MODULES` and
exports every registered op and reference; ``tests/test_registry.py`` checks every op's
forward, gradients and compiled form against its reference from these declarations, the
API page and the autograd page list them.

Adding an op touches four files: its module (ending with ``register``), the line of
:data:`MODULES` that names it, its tests and its page.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

# The op modules, in the order the package imports them: a new op adds its module here.
MODULES = ("vector_add", "transpose", "softmax", "matmul", "attention", "cross_entropy",
           "norms", "reduction")


@dataclass(frozen=True)
class Op:
    """One public op, as its module declares it."""

    name: str
    call: Callable  # the launcher users call: triton_guide.<name>
    reference: Callable  # the same computation in plain PyTorch: triton_guide.<name>_reference
    # device -> (positional tensors and arguments, keyword arguments): small float32 inputs
    # that the launcher and the reference both take, under the interpreter too
    example: Callable[[torch.device], tuple[tuple, dict]]
    differentiable: bool  # autograd records it: gradients of its float tensor arguments
    compile_safe: bool  # torch.compile(fullgraph=True) captures it as one operator


OPS: dict[str, Op] = {}


def register(name: str, call: Callable, reference: Callable, *,
             example: Callable[[torch.device], tuple[tuple, dict]],
             differentiable: bool, compile_safe: bool) -> None:
    """Declare an op (see the module docstring); a name registered twice is an error."""
    if name in OPS:
        raise ValueError(f"op {name!r} is registered twice")
    if call.__name__ != name or reference.__name__ != f"{name}_reference":
        raise ValueError(
            f"op {name!r}: the launcher must be named {name} and the reference "
            f"{name}_reference, got {call.__name__} and {reference.__name__}"
        )
    OPS[name] = Op(name, call, reference, example, differentiable, compile_safe)


def load() -> dict[str, Op]:
    """Import every op module in :data:`MODULES` (each registers its ops); return :data:`OPS`."""
    for module in MODULES:
        importlib.import_module(f"{__package__}.{module}")
    return OPS
