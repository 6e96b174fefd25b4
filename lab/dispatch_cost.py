"""Host cost of calling a Python kernel through torch.library.custom_op, through a raw
Library registration (define + impl per dispatch key, autograd as a Python kernel), and
directly, on CPU tensors with a body that only allocates: what the dispatch alone costs.

    python lab/dispatch_cost.py
"""
import time, torch
from torch.library import custom_op, Library

def fwd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)

op = custom_op("probe::add_custom", fwd, mutates_args=())
op.register_fake(lambda x, y: torch.empty_like(x))
op.register_autograd(lambda ctx, g: (g, g), setup_context=lambda ctx, inputs, output: None)

lib = Library("probe2", "DEF")
lib.define("add_raw(Tensor x, Tensor y) -> Tensor")
lib.impl("add_raw", fwd, "CPU")
lib.impl("add_raw", fwd, "CUDA")
lib.impl("add_raw", lambda x, y: torch.empty_like(x), "Meta")
class F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        with torch._C._AutoDispatchBelowAutograd():
            return torch.ops.probe2.add_raw(x, y)
    @staticmethod
    def backward(ctx, g): return g, g
def autograd_kernel(x, y):
    if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad):
        return F.apply(x, y)
    with torch._C._AutoDispatchBelowAutograd():
        return torch.ops.probe2.add_raw(x, y)
lib.impl("add_raw", autograd_kernel, "Autograd")

x = torch.randn(16); y = torch.randn(16)
def t(fn, n=20000):
    for _ in range(1000): fn()
    s = time.perf_counter()
    for _ in range(n): fn()
    return (time.perf_counter() - s) / n * 1e6
custom = torch.ops.probe.add_custom.default
raw = torch.ops.probe2.add_raw.default
print(f"direct forward       {t(lambda: fwd(x, y)):6.2f} us")
print(f"custom_op .default   {t(lambda: custom(x, y)):6.2f} us")
print(f"custom_op object     {t(lambda: op(x, y)):6.2f} us")
print(f"Library raw .default {t(lambda: raw(x, y)):6.2f} us")
print(f"x + y                {t(lambda: x + y):6.2f} us")
with torch.no_grad():
    print(f"no_grad custom       {t(lambda: custom(x, y)):6.2f} us")
    print(f"no_grad raw          {t(lambda: raw(x, y)):6.2f} us")
