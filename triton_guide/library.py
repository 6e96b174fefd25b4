"""How five of the ops reach autograd and ``torch.compile``: as registered PyTorch operators.

``vector_add``, ``transpose``, ``matmul``, ``softmax`` and ``attention`` are registered with
:func:`torch.library.custom_op` in the ``triton_guide`` namespace
(``torch.ops.triton_guide.matmul``, ...; softmax and attention as a forward and a backward
operator each, such as ``softmax`` and ``softmax_backward``). Each public function
validates its arguments in Python, then either launches its kernel directly or, when
autograd has to record the call or ``torch.compile`` is tracing it
(:func:`through_operator`), calls its operator, whose implementation is the same launcher.
Beside it the module registers

* a *fake* implementation, which says the output's shape, dtype and strides without
  running anything (``torch.compile`` traces with such stand-in tensors), and
* an autograd formula (the backward): for ``vector_add`` the incoming gradient passed on
  unchanged, for ``transpose`` and ``matmul`` the op's own operator again (so their
  gradients can be differentiated in turn), and for ``softmax`` and ``attention`` a
  backward operator that launches backward kernels.

Those backward kernels have no backward of their own, so softmax's and attention's
gradients cannot be differentiated again; :func:`refuse_double_backward` turns that into an
error that says so.

The other ops do not go through this module. ``cross_entropy``, ``layer_norm`` and
``rms_norm`` are :class:`torch.autograd.Function` subclasses: autograd records them, but
they are not operators and have no fake implementation. ``vector_sum`` has no backward.
"""

from __future__ import annotations

import torch


def through_operator(*tensors: torch.Tensor) -> bool:
    """Whether a call must go through the registered operator rather than launch directly.

    True while ``torch.compile`` traces the call, and when autograd must record it (grad
    mode is on and an input requires grad). Inside the operator's implementation grad mode
    is off, so the launcher runs directly there.
    """
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def double_backward_message(op_name: str) -> str:
    return (
        f"{op_name} has no second derivative: its backward kernels are not differentiable, "
        f"so the gradient computed with create_graph=True cannot be differentiated again "
        f"(as a gradient penalty would); use {op_name}_reference for that term instead"
    )


def refuse_double_backward(backward_op, op_name: str) -> None:
    """Make differentiating through ``backward_op`` raise a RuntimeError that names ``op_name``.

    The first backward works as usual; with ``create_graph=True`` its results get a
    history, and a second backward through them raises.
    """

    def setup_context(ctx, inputs, output):
        pass

    def refuse(ctx, *grads):
        raise RuntimeError(double_backward_message(op_name))

    backward_op.register_autograd(refuse, setup_context=setup_context)
