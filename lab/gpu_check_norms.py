"""What the norms' compensated (Kahan) gradient sums cost and buy, on a GPU.

    python lab/gpu_check_norms.py results.json      (CUDA GPU, about 1 minute)

For RMSNorm and LayerNorm with a bias, float32 and bfloat16, at 16384 rows x 4096, 65536 x
1024 and 4096 x 16384: the backward (``norm_backward``: dx, dweight and
dbias, both kernels) timed with its sums compensated and plain, in turns (GPU time,
medians of ROUNDS rounds); and the weight (and bias) gradient's relative error against
float64, ours both ways and torch's own in the input dtype. Printed as a table and written
as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import median

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triton_guide.benchmark import gpu_ms  # noqa: E402
from triton_guide.norms import default_num_partials, norm_backward, norm_forward  # noqa: E402
from triton_guide.testing import relative_error  # noqa: E402

# the shape; more rows per program; the widest rows (16 warps), where compiling for
# sm_90 showed the compensations spilling (344 -> 1232 bytes per thread)
SHAPES = [(16384, 4096), (65536, 1024), (4096, 16384)]
ROUNDS = 5
EPS = 1e-5


def torch_gradients(norm, x, weight, bias, grad_y):
    """torch's weight (and bias) gradients of the norm, in the inputs' dtype."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias) if t is not None]
    if norm == "rms_norm":
        y = torch.nn.functional.rms_norm(leaves[0], x.shape[-1:], leaves[1], EPS)
    else:
        y = torch.nn.functional.layer_norm(leaves[0], x.shape[-1:], leaves[1], leaves[2], EPS)
    return torch.autograd.grad(y, leaves[1:], grad_y.to(y.dtype))


def measure(norm, rows, hidden, dtype):
    subtract_mean = norm == "layer_norm"
    x = torch.randn(rows, hidden, device="cuda").to(dtype)
    weight = (1 + 0.5 * torch.randn(hidden, device="cuda")).to(dtype)
    bias = torch.randn(hidden, device="cuda").to(dtype) if subtract_mean else None
    grad_y = torch.randn(rows, hidden, device="cuda").to(dtype)
    exact = torch_gradients(norm, *(None if t is None else t.double()
                                    for t in (x, weight, bias, grad_y)))
    theirs = torch_gradients(norm, x, weight, bias, grad_y)
    _, mean, rstd = norm_forward(x, weight, bias, EPS, subtract_mean)

    def backward(compensated):
        return norm_backward(grad_y, x, weight, mean, rstd, bias is not None, subtract_mean,
                             compensated=compensated)

    row = dict(norm=norm, rows=rows, hidden=hidden, dtype=str(dtype).removeprefix("torch."),
               programs=default_num_partials(rows))
    for name, grads in (("kahan", backward(True)[1:]), ("plain", backward(False)[1:]),
                        ("torch", theirs)):
        for label, got, want in zip(("dweight", "dbias"), grads, exact):
            if got is not None:
                row[f"{label}_error_{name}"] = relative_error(got, want)
    times = {"kahan": [], "plain": []}
    for _ in range(ROUNDS):
        for name in times:
            times[name].append(gpu_ms([lambda c=name == "kahan": backward(c)]))
    row.update({f"backward_ms_{name}": median(values) for name, values in times.items()})
    return row


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(torch.cuda.get_device_name())
    print(f"{'norm':<11}{'shape':>12}{'dtype':>9}{'bwd ms kahan':>14}{'plain':>8}"
          f"{'dweight err kahan':>19}{'plain':>10}{'torch':>10}{'dbias kahan':>13}"
          f"{'plain':>10}{'torch':>10}")
    rows = []
    for norm in ("rms_norm", "layer_norm"):
        for shape in SHAPES:
            for dtype in (torch.float32, torch.bfloat16):
                row = measure(norm, *shape, dtype)
                rows.append(row)
                bias = "".join(f"{row[f'dbias_error_{n}']:10.1e}" for n in ("kahan", "plain",
                                                                           "torch")) \
                    if "dbias_error_kahan" in row else ""
                print(f"{norm:<11}{f'{shape[0]}x{shape[1]}':>12}{row['dtype']:>9}"
                      f"{row['backward_ms_kahan']:14.3f}{row['backward_ms_plain']:8.3f}"
                      f"{row['dweight_error_kahan']:19.1e}{row['dweight_error_plain']:10.1e}"
                      f"{row['dweight_error_torch']:10.1e}{bias[:10]:>13}{bias[10:]}",
                      flush=True)
                torch.cuda.empty_cache()
    Path(sys.argv[1]).write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                 torch=torch.__version__, rows=rows), indent=1))


if __name__ == "__main__":
    main()
