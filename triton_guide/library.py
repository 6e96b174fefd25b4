"""How every op reaches autograd and ``torch.compile``: one pattern, :class:`Operator`.

An op's launcher validates its arguments in Python, then calls an :class:`Operator` built
from the op's pieces:

* ``forward``: the function that launches the kernels, with annotated arguments
  (``torch.Tensor``, ``int``, ``float``, ``bool``, ``str``); it returns a tensor or a
  tuple of tensors (outputs the backward needs, such as attention's log-sum-exp, included);
* ``fake``: the outputs' shapes, dtypes and strides without running anything
  (``torch.compile`` traces with such stand-in tensors);
* ``setup_context`` and ``backward``: what to save, and the gradient formula, in
  :func:`torch.library.register_autograd`'s form. A backward that launches kernels calls
  other Operators, so it works the same in both modes below.

From these the Operator makes two things and picks one per call:

* a PyTorch operator, ``torch.ops.triton_guide.<name>`` (:func:`torch.library.custom_op`),
  for ``torch.compile``: the compiled graph holds the call as one opaque node;
* a :class:`torch.autograd.Function` for eager calls that autograd must record. It runs the
  same ``forward``, ``setup_context`` and ``backward``, without the operator's dispatch, which
  costs tens of microseconds of host time per call.

A call that autograd need not record (no input requires grad, or grad mode is off) runs
``forward`` directly: no dispatch at all. Tensor subclasses (the fake and functional tensors
that AOT autograd traces a backward formula with, say) always go through the operator.

An Operator given ``backward=None`` is a kernel without a derivative of its own (the
backward kernels of softmax and attention): differentiating through it again
(``create_graph=True``, then a second backward) raises an error that names the op, in both
modes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter


def double_backward_message(op_name: str) -> str:
    return (
        f"{op_name} has no second derivative: its backward kernels are not differentiable, "
        f"so the gradient computed with create_graph=True cannot be differentiated again "
        f"(as a gradient penalty would); use {op_name}_reference for that term instead"
    )


def _no_context(ctx, inputs, output) -> None:
    pass


def _eager_function(name: str, forward: Callable, setup_context: Callable,
                    backward: Callable) -> type[torch.autograd.Function]:
    """A :class:`torch.autograd.Function` running the op's own forward and backward.

    It is written in the form whose ``forward`` takes ``ctx``: given a separate
    ``setup_context``, ``Function.apply`` binds the arguments to ``forward``'s signature
    with :mod:`inspect` on every call, which costs more than the launch."""

    def function_forward(ctx, *args):
        output = forward(*args)
        setup_context(ctx, args, output)
        return output

    def function_backward(ctx, *grads):
        return backward(ctx, *grads)

    class_name = "".join(part.title() for part in name.split("_"))  # grad_fn: SoftmaxBackward
    return type(class_name, (torch.autograd.Function,), {
        "forward": staticmethod(function_forward),
        "backward": staticmethod(function_backward),
    })


# Every Operator made, by name: torch.ops.triton_guide.<name> for each.
OPERATORS: dict[str, Operator] = {}


class Operator:
    """One op's forward, callable as ``operator(*args)`` (see the module docstring).

    ``name``: the operator's name in the ``triton_guide`` namespace. ``forward``, ``fake``,
    ``setup_context``, ``backward``: as in the module docstring. ``refuse_name``: with
    ``backward=None``, the op named in the error a second derivative raises.
    """

    def __init__(self, name: str, forward: Callable, *, fake: Callable,
                 backward: Callable | None = None, setup_context: Callable | None = None,
                 refuse_name: str | None = None):
        self.name = name
        self.forward = forward
        if backward is None:
            op_name = refuse_name or name

            def backward(ctx, *grads):
                raise RuntimeError(double_backward_message(op_name))
        setup_context = setup_context or _no_context
        self.op = torch.library.custom_op(f"triton_guide::{name}", forward, mutates_args=())
        self.op.register_fake(fake)
        self.op.register_autograd(backward, setup_context=setup_context)
        self.function = _eager_function(name, forward, setup_context, backward)
        OPERATORS[name] = self

    def __call__(self, *args):
        if _is_compiling():
            return self.op(*args)
        records = False
        for arg in args:
            kind = type(arg)
            if kind is _Tensor or kind is _Parameter:
                records = records or arg.requires_grad
            elif isinstance(arg, _Tensor):
                # A tensor subclass: fake or functional tensors while AOT autograd traces a
                # backward formula, or another library's wrapper. The operator's dispatch
                # knows what to do with those; launching a kernel on them does not.
                return self.op(*args)
        if records and _grad_enabled():
            return self.function.apply(*args)
        return self.forward(*args)
