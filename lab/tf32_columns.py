"""(Twenty-fourth session: run again after matmul.k_major, the package's own copy.)
The TF32 prediction of the twenty-third session, measured: float32 matmul under "high"
(tl.dot tf32) with b stored by rows (the kernel transposes each b tile through shared
memory) against b stored by columns (no transpose), and what the one-off copy of b into
columns costs. Also under "highest" (tf32x3). cuBLAS in the same run. GPU time on cold
copies (triton_guide.benchmark.gpu_ms); error against float64 with the element rule of
report.py's precision part.

    python lab/tf32_columns.py OUT.json
"""
import json
import sys

import torch

import triton_guide as tg
from triton_guide.benchmark import calls_on, cold_matmul_inputs, gpu_ms, tflop_per_s

# Since the twenty-fourth session triton_guide.matmul itself copies float32 operands K-major (matmul.k_major),
# so "ours" with b by rows includes that copy; before, it transposed tiles in its loop.
GUIDE_NOTE = "ours copies float32 operands K-major (matmul.k_major)"
SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (3000, 5000, 2000), (4096, 11008, 4096), (128, 4096, 4096)]


def by_columns(b):
    return b.t().contiguous().t()


def main(out):
    rows = []
    for setting in ("high", "highest"):
        torch.set_float32_matmul_precision(setting)
        for m, n, k in SHAPES:
            if setting == "highest" and m * n * k > 4096**3:
                continue
            pairs = cold_matmul_inputs(m, n, k, torch.float32)
            variants = {"ours": (tg.matmul, pairs),
                        "ours, b by columns": (tg.matmul, [(a, by_columns(b)) for a, b in pairs]),
                        "ours, a by columns": (tg.matmul, [(by_columns(a), b) for a, b in pairs]),
                        "cuBLAS": (torch.matmul, pairs)}
            a, b = pairs[0]
            exact = a.double() @ b.double()
            scale = exact.abs() + exact.pow(2).mean().sqrt()
            flops = 2 * m * n * k
            entry = {"setting": setting, "shape": [m, n, k], "triton_guide": GUIDE_NOTE}
            for name, (fn, ps) in variants.items():
                fn(*ps[0])  # compile and autotune
                ms = min(gpu_ms(calls_on(fn, ps)) for _ in range(3))
                error = ((fn(*ps[0]).double() - exact).abs() / scale).max().item()
                entry[name] = {"tflops": tflop_per_s(flops, ms), "ms": ms, "error": error}
            copy_ms = min(gpu_ms([lambda b=b: by_columns(b) for _, b in pairs])
                          for _ in range(3))
            entry["copy b to columns ms"] = copy_ms
            print(f"{setting:<7} {m}x{n}x{k}: " + " | ".join(
                f"{name} {entry[name]['tflops']:6.1f} ({entry[name]['error']:.1e})"
                for name in variants) + f" TFLOP/s (max error); copy of b {copy_ms * 1e3:.0f} us",
                flush=True)
            rows.append(entry)
            json.dump({"gpu": torch.cuda.get_device_name(), "rows": rows},
                      open(out, "w"), indent=1)
            del pairs, variants, a, b, exact, scale
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1])
