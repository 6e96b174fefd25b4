"""The ops as registered PyTorch operators: torch.compile(fullgraph=True), forward and backward.

On a GPU the tests compile with Inductor, the default backend. Under the interpreter they
compile with ``aot_eager``: Dynamo captures the whole function in one graph and AOT
autograd traces forward and backward with fake tensors (what the registrations must get
right), then runs the graph eagerly. Inductor works on the CPU too, but spends tens of
seconds compiling C++ for each graph, too long for CI.
"""

import pytest
import torch

from triton_guide import attention, matmul, runtime, softmax, transpose, vector_add
from triton_guide.testing import tolerance

BACKENDS = [
    pytest.param("aot_eager", id="aot_eager"),
    pytest.param(
        "inductor", id="inductor",
        marks=pytest.mark.skipif(
            runtime.interpreting(),
            reason="needs a GPU: on the CPU Inductor compiles C++ for tens of seconds per graph",
        ),
    ),
]

# op -> (function to compile, shapes of its inputs); each function mixes the op with torch
# operations, as a model would.
CASES = {
    "vector_add": (lambda x, y: vector_add(x, y).sin(), [(3, 37), (3, 37)]),
    "softmax_one_pass": (lambda x: softmax(x * 2.0).log(), [(5, 33)]),
    "softmax_online": (lambda x: softmax(x, method="online", block_size=16).log(), [(5, 33)]),
    "transpose": (lambda x: transpose(x.relu()) * 3.0, [(19, 40)]),
    "matmul": (lambda a, b: matmul(a, b.t()).tanh(), [(21, 16), (9, 16)]),
    "attention": (lambda q, k, v: attention(q, k, v * 0.5, causal=True), [(1, 2, 17, 16)] * 3),
}
RTOL = tolerance(torch.float32, tensor_cores=True)


def run(function, inputs, grad_out=None):
    """The output and, if grad_out is given, the inputs' gradients of function(*inputs)."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = function(*leaves)
    if grad_out is None:
        return out, None
    return out, torch.autograd.grad(out, leaves, grad_out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_forward_matches_eager(case, backend, device, check):
    torch._dynamo.reset()
    function, shapes = CASES[case]
    inputs = [torch.randn(shape, device=device) for shape in shapes]
    compiled = torch.compile(function, fullgraph=True, backend=backend)
    with torch.no_grad():
        check(f"compiled {case}", compiled(*inputs), function(*inputs), rtol=RTOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_compiled_backward_matches_eager(case, backend, device, check):
    torch._dynamo.reset()
    function, shapes = CASES[case]
    inputs = [torch.randn(shape, device=device) for shape in shapes]
    compiled = torch.compile(function, fullgraph=True, backend=backend)
    out, _ = run(function, inputs)
    grad_out = torch.randn_like(out)
    _, expected = run(function, inputs, grad_out)
    _, got = run(compiled, inputs, grad_out)
    for index, (g, w) in enumerate(zip(got, expected)):
        check(f"compiled {case} backward", g, w, rtol=RTOL,
              atol=RTOL * max(w.abs().max().item(), 1e-3), name=f"grad of input {index}")


OPERATORS = {
    "vector_add": lambda d: (torch.ops.triton_guide.vector_add.default, (torch.randn(37, device=d), torch.randn(37, device=d), 16)),
    "softmax": lambda d: (torch.ops.triton_guide.softmax.default, (torch.randn(4, 9, device=d), "one_pass", 16)),
    "transpose": lambda d: (torch.ops.triton_guide.transpose.default, (torch.randn(7, 9, device=d), 8, 8)),
    "matmul": lambda d: (torch.ops.triton_guide.matmul.default, (torch.randn(7, 9, device=d), torch.randn(9, 5, device=d))),
    "attention_forward": lambda d: (
        torch.ops.triton_guide.attention_forward.default,
        tuple(torch.randn(1, 1, 5, 16, device=d) for _ in range(3)) + (False, 0.25),
    ),
}


@pytest.mark.parametrize("name", list(OPERATORS))
def test_registration_passes_opcheck(name, device):
    # torch.library.opcheck: schema, fake implementation and autograd registration agree
    # with what the real implementation does.
    op, args = OPERATORS[name](device)
    args = tuple(a.requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    torch.library.opcheck(op, args)
