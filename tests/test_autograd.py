"""Gradients through every op, against float64 PyTorch autograd of the reference."""

import pytest
import torch

from triton_guide import (attention, layer_norm, matmul, rms_norm, softmax, transpose,
                          vector_add)
from triton_guide.library import OPERATORS, double_backward_message
from triton_guide.testing import tolerance

RTOL = tolerance(torch.float32, tensor_cores=True)


def grads_match(op_name, call, reference, inputs, check, *, grad_out=None):
    """Backpropagate one random output gradient through both; compare every input's grad."""
    ours = [t.detach().requires_grad_() for t in inputs]
    wide = [t.detach().double().requires_grad_() for t in inputs]
    out = call(*ours)
    expected = reference(*wide)
    grad_out = torch.randn_like(out) if grad_out is None else grad_out
    got = torch.autograd.grad(out, ours, grad_out)
    want = torch.autograd.grad(expected, wide, grad_out.double())
    for index, (g, w) in enumerate(zip(got, want)):
        check(f"{op_name} backward", g, w, rtol=RTOL, atol=RTOL * max(w.abs().max().item(), 1e-3),
              name=f"grad of input {index}")


def test_vector_add_gradient_is_identity(device, check):
    x, y = torch.randn(2, 3, 37, device=device).unbind(0)
    grads_match("vector_add", vector_add, torch.add, (x.contiguous(), y.contiguous()), check)


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided_view"])
def test_transpose_gradient(strided, device, check):
    x = torch.randn(40, 30, device=device)
    if strided:
        x = x[::2, 3::3]
    grads_match("transpose", transpose, lambda t: t.t(), (x,), check)


@pytest.mark.parametrize("layout", ["plain", "a_transposed", "b_transposed"])
def test_matmul_gradients(layout, device, check):
    a = torch.randn(23, 17, device=device)
    b = torch.randn(17, 9, device=device)
    if layout == "a_transposed":
        a = torch.randn(17, 23, device=device).t()
    if layout == "b_transposed":
        b = torch.randn(9, 17, device=device).t()
    grads_match("matmul", matmul, torch.matmul, (a, b), check)


@pytest.mark.parametrize(
    "shape,method,block_size",
    [((5, 33), "one_pass", None), ((3, 100), "online", 32), ((2, 3, 17), "auto", None), ((1,), "auto", None)],
    ids=["one_pass", "online_4_blocks", "rank_3", "n=1"],
)
def test_softmax_gradient(shape, method, block_size, device, check):
    kwargs = {"method": method}
    if block_size is not None:
        kwargs["block_size"] = block_size
    x = torch.randn(shape, device=device) * 3
    grads_match("softmax", lambda t: softmax(t, **kwargs), lambda t: torch.softmax(t, -1), (x,), check)


def test_softmax_gradient_broadcast_along_rows(device, check):
    # (out * w).sum().backward() with w of shape (50,) hands softmax's backward an expanded
    # gradient whose row stride is 0.
    x = torch.randn(4, 50, device=device)
    grad_out = torch.randn(50, device=device).expand(4, 50)
    assert grad_out.stride() == (0, 1)
    grads_match("softmax", softmax, lambda t: torch.softmax(t, -1), (x,), check, grad_out=grad_out)


def test_gradients_combine_with_other_terms(device, check):
    # The class of bug this closes: a loss that mixes the op with torch terms.
    x = torch.randn(6, 20, device=device, requires_grad=True)
    loss = (softmax(x) * torch.arange(20, device=device)).sum() + (x**2).sum()
    loss.backward()
    x64 = x.detach().double().requires_grad_()
    expected = (torch.softmax(x64, -1) * torch.arange(20, device=device)).sum() + (x64**2).sum()
    expected.backward()
    check("softmax backward", x.grad, x64.grad, rtol=RTOL)


def test_matmul_second_derivative(device, check):
    # matmul's backward is made of matmuls, so it can be differentiated again.
    a = torch.randn(7, 5, device=device, requires_grad=True)
    b = torch.randn(5, 6, device=device)
    (grad_a,) = torch.autograd.grad(matmul(a, b).pow(2).sum(), a, create_graph=True)
    (second,) = torch.autograd.grad(grad_a.pow(2).sum(), a)
    a64 = a.detach().double().requires_grad_()
    (grad_a64,) = torch.autograd.grad((a64 @ b.double()).pow(2).sum(), a64, create_graph=True)
    (expected,) = torch.autograd.grad(grad_a64.pow(2).sum(), a64)
    check("matmul double backward", second, expected, rtol=RTOL)


@pytest.mark.parametrize("op", ["attention", "softmax", "layer_norm", "rms_norm"])
def test_double_backward_is_refused_by_name(op, device):
    if op == "attention":
        x = torch.randn(1, 2, 9, 16, device=device, requires_grad=True)
        out = attention(x, x, x, causal=True)
    elif op in ("layer_norm", "rms_norm"):
        x = torch.randn(3, 9, device=device, requires_grad=True)
        weight = torch.randn(9, device=device)
        out = layer_norm(x, weight) if op == "layer_norm" else rms_norm(x, weight)
    else:
        x = torch.randn(3, 9, device=device, requires_grad=True)
        out = softmax(x)
    (grad,) = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match=double_backward_message(op).split(":")[0]):
        grad.pow(2).sum().backward()


@pytest.mark.parametrize("op", ["vector_add", "softmax", "transpose", "matmul", "attention"])
def test_no_grad_inputs_give_plain_outputs(op, device):
    # Without requires_grad the launcher runs directly: no autograd node is recorded.
    x = torch.randn(1, 1, 4, 16, device=device)
    calls = {
        "vector_add": lambda: vector_add(x, x),
        "softmax": lambda: softmax(x),
        "transpose": lambda: transpose(x[0, 0]),
        "matmul": lambda: matmul(x[0, 0], x[0, 0].t()),
        "attention": lambda: attention(x, x, x),
    }
    assert calls[op]().grad_fn is None


def test_eager_autograd_does_not_dispatch_through_the_operator(device, check, monkeypatch):
    # In eager mode autograd records an autograd.Function running the same launcher; the
    # registered operator's dispatch (tens of microseconds a call) is for torch.compile.
    operators = OPERATORS
    assert {"matmul", "softmax", "softmax_backward", "layer_norm"} <= set(operators)

    def refuse(*args):
        raise AssertionError("the operator was dispatched in eager mode")

    for operator in operators.values():
        monkeypatch.setattr(operator, "op", refuse)
    a = torch.randn(6, 5, device=device, requires_grad=True)
    b = torch.randn(5, 4, device=device)
    out = softmax(matmul(a, b))
    out.backward(torch.ones_like(out))
    a64 = a.detach().double().requires_grad_()
    expected = torch.softmax(a64 @ b.double(), -1)
    expected.backward(torch.ones_like(expected))
    check("softmax(matmul) backward", a.grad, a64.grad, rtol=RTOL, atol=1e-6)


def test_a_parameter_is_recorded(device, check):
    # nn.Parameter is a tensor subclass that must still take the eager autograd path.
    x = torch.randn(4, 8, device=device)
    weight = torch.nn.Parameter(torch.randn(8, device=device))
    rms_norm(x, weight).sum().backward()
    w64 = weight.detach().double().requires_grad_()
    torch.nn.functional.rms_norm(x.double(), (8,), w64, torch.finfo(torch.float32).eps).sum().backward()
    check("rms_norm weight grad", weight.grad, w64.grad, rtol=RTOL)
