"""
Autograd and torch.compile
==========================

A Triton kernel launched from Python is invisible to autograd: it records nothing, so a
loss built on the kernel's output gets no gradient through it. ``torch.compile`` can trace
a plain ``kernel[grid](...)`` call (PyTorch 2.3 and later), but then all the Python of the
launcher around it must be traceable too, and the result still has no backward. This page
shows how the package's ops take part in both, as operators PyTorch knows, and how you can
do the same for a kernel of your own.

You will learn:

* the softmax backward pass, ``dx = y * (dy - sum(dy * y))``, as one Triton kernel;
* how to register a kernel as a PyTorch operator with :func:`torch.library.custom_op`,
  a *fake* implementation and an autograd formula;
* how to check the registration with :func:`torch.library.opcheck`, and compile a
  function that calls it with ``torch.compile(fullgraph=True)``.
"""

# %%
import torch
import triton
import triton.language as tl

# Without a GPU, triton_guide sets TRITON_INTERPRET=1, which Triton reads each time
# @triton.jit decorates a function, so this page's kernels run in the interpreter too.
import triton_guide
from triton_guide import matmul, runtime, softmax
from triton_guide.benchmark import Benchmark
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)
print(Benchmark().stamp())
device = runtime.device()

# %%
# The gradient of softmax
# -----------------------
# For one row, ``y = softmax(x)`` and a gradient ``dy`` arriving from the loss. Every
# output of the row depends on every input: differentiating
# ``y_i = exp(x_i) / sum_k exp(x_k)`` gives the Jacobian
#
# .. math:: \frac{\partial y_i}{\partial x_j} = y_i \, (\delta_{ij} - y_j)
#
# where ``delta_ij`` is 1 when ``i = j`` and 0 otherwise. The chain rule sums over the
# outputs, and the ``delta`` keeps one term of the first part of the sum:
#
# .. math:: \frac{\partial L}{\partial x_j} = \sum_i dy_i \, y_i \, (\delta_{ij} - y_j)
#    = y_j \Big(dy_j - \sum_i dy_i \, y_i\Big)
#
# One dot product per row, then one element-wise pass, and it needs only the forward's
# *output* ``y``: the input ``x`` need not be kept for the backward pass. The kernel below
# follows the online kernel's shape: one program per row, a loop over blocks of columns
# that accumulates the dot product per lane, one reduction, and a second loop that writes
# the gradient. ``dy`` arrives with whatever strides autograd gives it (a gradient
# broadcast along rows has row stride 0), so the kernel takes both of its strides.
#
# .. literalinclude:: /../triton_guide/softmax.py
#    :pyobject: softmax_backward_kernel
#
# Checked against PyTorch's own autograd in float64:

x = torch.randn(runtime.pick(interpreter=(37, 300), gpu=(4096, 3000)), device=device)
x.requires_grad_()
y = softmax(x)
print("softmax output records its history:", type(y.grad_fn).__name__)
grad_y = torch.randn_like(y)
(grad_x,) = torch.autograd.grad(y, x, grad_y)
x64 = x.detach().double().requires_grad_()
(expected,) = torch.autograd.grad(torch.softmax(x64, dim=-1), x64, grad_y.double())
error = assert_close(grad_x, expected, rtol=tolerance(torch.float32))
print(f"softmax backward, float32 {tuple(x.shape)}: relative error {error:.1e}")

# %%
# Your own kernel as a PyTorch operator
# -------------------------------------
# Take a small kernel of your own: SiLU, ``x * sigmoid(x)``, fused into one pass.


@triton.jit
def silu_kernel(x_ptr, out_ptr, num_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < num_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, x * tl.sigmoid(x), mask=mask)


# %%
# Launched directly, it computes SiLU, but autograd sees nothing: the kernel writes into a
# tensor made for it, and no operation PyTorch knows connects that tensor to the input. So
# even with an input that requires grad, the output has no ``grad_fn`` and does not require
# grad, and no gradient can flow back through it.

x_raw = torch.randn(5, 77, device=device, requires_grad=True)
raw_out = torch.empty_like(x_raw)
silu_kernel[(triton.cdiv(x_raw.numel(), 1024),)](x_raw, raw_out, x_raw.numel(),
                                                 BLOCK_SIZE=1024)
error = assert_close(raw_out, torch.nn.functional.silu(x_raw.detach().double()),
                     rtol=tolerance(torch.float32))
print(f"raw launch: relative error {error:.1e}; input requires_grad {x_raw.requires_grad}, "
      f"output requires_grad {raw_out.requires_grad}, grad_fn {raw_out.grad_fn}")

# %%
# Three registrations make it a first-class operator:
#
# 1. :func:`torch.library.custom_op` (PyTorch 2.4 and later, as are the two
#    registrations after it) turns the launcher into ``torch.ops.guide.silu``;
#    the type hints become its schema. ``mutates_args=()`` promises it writes none of
#    its inputs.
# 2. A *fake* implementation says what the output looks like (shape, dtype, strides)
#    without computing it. ``torch.compile`` traces with such stand-in tensors, so this
#    is all it needs to know about the kernel.
# 3. An autograd formula: ``setup_context`` saves what the backward needs, and the
#    backward returns one gradient per input. Here it is plain PyTorch; it could be
#    another registered kernel, as softmax's is.


@torch.library.custom_op("guide::silu", mutates_args=())
def silu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    silu_kernel[grid](x, out, x.numel(), BLOCK_SIZE=1024)
    return out


@silu.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def silu_setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def silu_backward(ctx, grad_out):
    (x,) = ctx.saved_tensors
    sigmoid = torch.sigmoid(x)
    return grad_out * sigmoid * (1 + x * (1 - sigmoid))


silu.register_autograd(silu_backward, setup_context=silu_setup_context)

# %%
# :func:`torch.library.opcheck` runs the operator against its registrations: the schema,
# the fake implementation's shapes and strides against the real output, and that
# autograd is registered the supported way. It raises on the first mismatch.

sample = torch.randn(5, 77, device=device, requires_grad=True)
torch.library.opcheck(silu, (sample,))
print("opcheck passed for guide::silu")

# %%
# ``opcheck`` checks the registrations against the operator and against each other; it
# never compares what the backward returns with the true derivative. Neither does the
# compiled-against-eager comparison further down, which runs the same backward on both
# sides. So check the gradient itself, against PyTorch's autograd through
# ``torch.nn.functional.silu`` in float64:

x = torch.randn(runtime.pick(interpreter=(37, 300), gpu=(4096, 3000)), device=device,
                requires_grad=True)
y = silu(x)
print("through the operator, the output records its history:", type(y.grad_fn).__name__)
grad_y = torch.randn_like(y)
(grad_x,) = torch.autograd.grad(y, x, grad_y)
x64 = x.detach().double().requires_grad_()
(expected,) = torch.autograd.grad(torch.nn.functional.silu(x64), x64, grad_y.double())
error = assert_close(grad_x, expected, rtol=tolerance(torch.float32))
print(f"silu backward, float32 {tuple(x.shape)}: relative error {error:.1e}")

# %%
# Compile a function that uses it
# -------------------------------
# ``fullgraph=True`` turns any graph break into an error, so a successful compile proves
# the whole function, operator included, became one graph. On a GPU the compiler is
# Inductor. Under the Triton interpreter the page compiles with the ``aot_eager``
# backend, which captures and differentiates the same graph but runs it without
# generating code: Inductor would spend its time compiling C++ for the CPU.

backend = runtime.pick(interpreter="aot_eager", gpu="inductor")
print(f"torch.compile backend: {backend}")


def layer(x, w):
    return silu(x @ w).sum(dim=-1)


compiled_layer = torch.compile(layer, fullgraph=True, backend=backend)
x = torch.randn(runtime.pick(interpreter=(64, 48), gpu=(4096, 1024)), device=device)
w = torch.randn(x.shape[1], 32, device=device)
results = {}
for name, fn in (("eager", layer), ("compiled", compiled_layer)):
    x_leaf = x.clone().requires_grad_()
    fn(x_leaf, w).sum().backward()
    results[name] = (fn(x, w), x_leaf.grad)
rtol = tolerance(torch.float32, tensor_cores=True)
forward_error = assert_close(results["compiled"][0], results["eager"][0], rtol=rtol)
backward_error = assert_close(results["compiled"][1], results["eager"][1], rtol=rtol)
print(f"compiled vs eager: forward {forward_error:.1e}, gradient {backward_error:.1e}")

# %%
# What this shows is that the compile succeeded with ``fullgraph=True``, and that the
# compiled function's gradient flows through the operator's registered backward. Under
# ``aot_eager`` the compiled graph runs the very kernels that eager mode runs, so the two
# agree to the bit; with Inductor the code around the operator (the product ``x @ w``,
# the sum) is generated afresh, and the differences, if any, are rounding.

# %%
# ``custom_op`` keeps the kernel opaque: ``torch.compile`` puts the call in its graph as
# one node and never looks inside. :func:`torch.library.triton_op`, public since
# PyTorch 2.6, also makes an operator, and ``register_autograd`` works on it the same way,
# but its body may call only PyTorch operators and Triton kernels, each launched as
# ``torch.library.wrap_triton(kernel)[grid](...)``. ``torch.compile`` looks inside such an
# operator by tracing its body at the level of PyTorch's dispatcher, where a plain launch
# is invisible; ``wrap_triton`` makes the launch traceable there, recorded as a node that
# names the kernel, its grid and its arguments. So ``torch.compile`` sees the kernel
# launches inside the operator and compiles them with the rest of the graph, and no
# ``register_fake`` is needed: the body itself, run on stand-in tensors, serves as the
# fake implementation.

# %%
# The package's ops follow one pattern (:class:`triton_guide.library.Operator`). Each
# public function validates its arguments, then hands them to an Operator made from the
# launcher, a fake implementation and the backward, which picks one of three paths per
# call: under ``torch.compile``, the registered operator ``torch.ops.triton_guide.<name>``
# (``custom_op`` + ``register_fake`` + ``register_autograd``, as ``silu`` above); when
# autograd must record the call, an ``autograd.Function`` running the same launcher and
# backward (the operator's dispatch costs tens of microseconds of host time per call); and
# otherwise the launcher itself. Each op also declares once, in
# :mod:`triton_guide.registry`, whether it is differentiable and compile-safe:

for op in triton_guide.registry.OPS.values():
    print(f"{op.name:<14} differentiable: {op.differentiable!s:<5}  "
          f"compile-safe: {op.compile_safe}")
print("operators in torch.ops.triton_guide:", ", ".join(triton_guide.library.OPERATORS))

# %%
# ``cross_entropy`` is the exception: its forward writes the gradient too (over the logits
# themselves with ``inplace_grad=True``), which a PyTorch operator may not do, so it stays
# a plain ``autograd.Function``. ``vector_sum`` has no backward.

compiled_block = torch.compile(
    lambda t: softmax(t * 0.5).log().sum(), fullgraph=True, backend=backend
)
t = torch.randn(8, 40, device=device, requires_grad=True)
compiled_block(t).backward()
t64 = t.detach().double().requires_grad_()
torch.log_softmax(t64 * 0.5, dim=-1).sum().backward()
error = assert_close(t.grad, t64.grad, rtol=tolerance(torch.float32), atol=1e-6)
print(f"compiled softmax block, gradient vs float64 torch: relative error {error:.1e}")

# %%
# A second derivative depends on what the backward is made of. Softmax's and attention's
# backward passes are kernels of their own, registered as operators with no backward, so
# differentiating their gradients again raises an error that says so:

(grad_t,) = torch.autograd.grad(softmax(t).pow(2).sum(), t, create_graph=True)
try:
    grad_t.sum().backward()
except RuntimeError as refusal:
    print("RuntimeError:", refusal)

# %%
# Matmul's backward is two more calls of its own operator (``grad_a = grad_c @ b^T`` and
# ``grad_b = a^T @ grad_c``), each with that same backward, so its gradient can be
# differentiated again:

a = torch.randn(8, 16, device=device, requires_grad=True)
b = torch.randn(16, 4, device=device)
(grad_a,) = torch.autograd.grad(matmul(a, b).pow(2).sum(), a, create_graph=True)
grad_a.pow(2).sum().backward()  # through matmul's backward, a function of a
a64 = a.detach().double().requires_grad_()
(grad_a64,) = torch.autograd.grad((a64 @ b.double()).pow(2).sum(), a64, create_graph=True)
grad_a64.pow(2).sum().backward()
error = assert_close(a.grad, a64.grad, rtol=tolerance(torch.float32, tensor_cores=True))
print(f"matmul second derivative vs float64 torch: relative error {error:.1e}")

# %%
# Takeaways
# ---------
# * A raw launch gets no gradient, and ``torch.compile`` must trace its launcher's
#   Python; registered as an operator, it is one opaque, differentiable node.
# * ``custom_op`` + ``register_fake`` + ``register_autograd`` is all a kernel needs to
#   compile with ``fullgraph=True`` and train; check the registrations with ``opcheck``
#   and the gradient's values against PyTorch's autograd.
# * :func:`torch.library.triton_op`, with each launch wrapped in
#   :func:`torch.library.wrap_triton`, is the alternative when ``torch.compile`` should see
#   the kernel launches inside the operator, not one opaque call.
# * Softmax's backward needs only its output: ``y * (dy - sum(dy * y))``, one kernel.
#
# Used here: :func:`triton_guide.softmax`, :func:`triton_guide.matmul`,
# :func:`triton_guide.testing.assert_close`, :func:`torch.library.custom_op`,
# :func:`torch.library.opcheck`, :func:`torch.nn.functional.silu`, :func:`torch.compile`.
