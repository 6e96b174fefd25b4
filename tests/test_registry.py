"""Every op the registry declares, checked from its declaration alone: the forward against
the float64 reference, the gradients of its float tensor arguments when it is
differentiable, and torch.compile(fullgraph=True) when it is compile-safe. A new op that
registers itself is tested here without a line of this file changing."""

import pytest
import torch

import triton_guide
from triton_guide import registry
from triton_guide.testing import tolerance

OPS = sorted(registry.OPS)
RTOL = tolerance(torch.float32, tensor_cores=True)


def inputs(op, device):
    args, kwargs = registry.OPS[op].example(device)
    return list(args), kwargs


def widened(args):
    return [a.detach().double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]


def test_every_exported_op_is_registered_and_every_registered_op_exported():
    exported = {name.removesuffix("_reference") for name in triton_guide.__all__
                if name.endswith("_reference")}
    assert exported == set(registry.OPS)
    for op in registry.OPS.values():
        assert getattr(triton_guide, op.name) is op.call
        assert getattr(triton_guide, f"{op.name}_reference") is op.reference


def test_a_second_registration_is_refused():
    op = registry.OPS["vector_add"]
    with pytest.raises(ValueError, match="registered twice"):
        registry.register("vector_add", op.call, op.reference, example=op.example,
                          differentiable=True, compile_safe=True)


@pytest.mark.parametrize("op", OPS)
def test_forward_matches_the_reference(op, device, check):
    args, kwargs = inputs(op, device)
    spec = registry.OPS[op]
    check(op, spec.call(*args, **kwargs), spec.reference(*widened(args), **kwargs), rtol=RTOL,
          atol=1e-6)


@pytest.mark.parametrize("op", [op for op in OPS if registry.OPS[op].differentiable])
def test_gradients_match_the_reference(op, device, check):
    spec = registry.OPS[op]
    args, kwargs = inputs(op, device)
    floats = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    ours = [a.detach().requires_grad_() if i in floats else a for i, a in enumerate(args)]
    wide = [a.requires_grad_() if i in floats else a for i, a in enumerate(widened(args))]
    out = spec.call(*ours, **kwargs)
    expected = spec.reference(*wide, **kwargs)
    grad_out = torch.randn_like(expected)
    got = torch.autograd.grad(out, [ours[i] for i in floats], grad_out.to(out.dtype))
    want = torch.autograd.grad(expected, [wide[i] for i in floats], grad_out)
    for index, g, w in zip(floats, got, want):
        check(f"{op} backward", g, w, rtol=RTOL, atol=RTOL * max(w.abs().max().item(), 1e-3),
              name=f"grad of argument {index}")


@pytest.mark.parametrize("op", [op for op in OPS if registry.OPS[op].compile_safe])
def test_compiles_whole(op, device, check):
    # aot_eager: Dynamo captures one graph (fullgraph), AOT autograd traces forward and
    # backward with fake tensors through the registered operators, then runs them.
    torch._dynamo.reset()
    spec = registry.OPS[op]
    args, kwargs = inputs(op, device)
    floats = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]

    def function(*tensors):
        return spec.call(*tensors, **kwargs)

    compiled = torch.compile(function, fullgraph=True, backend="aot_eager")
    eager_in = [a.detach().requires_grad_() if i in floats else a for i, a in enumerate(args)]
    compiled_in = [a.detach().requires_grad_() if i in floats else a for i, a in enumerate(args)]
    eager_out, compiled_out = function(*eager_in), compiled(*compiled_in)
    check(f"compiled {op}", compiled_out, eager_out, rtol=RTOL, atol=1e-6)
    grad_out = torch.randn_like(eager_out)
    want = torch.autograd.grad(eager_out, [eager_in[i] for i in floats], grad_out)
    got = torch.autograd.grad(compiled_out, [compiled_in[i] for i in floats], grad_out)
    for g, w in zip(got, want):
        check(f"compiled {op} backward", g, w, rtol=RTOL, atol=1e-6)
