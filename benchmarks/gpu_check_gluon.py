"""The Gluon kernels of triton_guide.gluon_matmul on an sm_90 GPU (H100, H200): checked,
then timed.

    python benchmarks/gpu_check_gluon.py OUT.json

1. ``tests/test_gluon_matmul.py`` run natively (pytest, in a child process): the kernels
   compiled for sm_90 without launching, the refusals, and on this GPU the matmul of every
   configuration against float64 at odd sizes in float16 and bfloat16, the copy exact.
2. What the GPU's own compiler made of each matmul configuration (registers, spills,
   shared memory, as ``n_regs``, ``n_spills``, ``metadata.shared``).
3. GPU time on cold copies of the inputs (``triton_guide.benchmark.gpu_ms``, see
   docs/measuring.md) of the Gluon matmul in each configuration, ``triton_guide.matmul``
   and ``torch.matmul`` (cuBLAS), at 4096 x 4096 x 4096 and 2000 x 3000 x 1000 (M x N x K),
   float16 and bfloat16, each timed product first checked against float64.

Prints a table of TFLOP/s and the ratio to cuBLAS; OUT.json gets the GPU and versions, the
pytest summary, every check and every timing. About 1-2 minutes on an H100 (compiling and
triton_guide.matmul's autotuning are most of it). Exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.pop("TRITON_GUIDE_RECORD", None)

from native_tests import run_test_module  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import triton_guide as tg  # noqa: E402
from triton_guide import gluon_matmul as gm  # noqa: E402
from triton_guide.benchmark import calls_on, cold_matmul_inputs, gpu_ms, tflop_per_s  # noqa: E402
from triton_guide.testing import relative_error, tolerance  # noqa: E402

SHAPES = [(4096, 4096, 4096), (2000, 3000, 1000)]  # (M, N, K)
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def gpu_compiled() -> dict:
    """Registers, spills and shared memory of each matmul configuration as compiled here."""
    out = {}
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    for name, config in gm.CONFIGS.items():
        c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
        grid, args, options = gm.matmul_launch(a, a, c, 256, 256, 256, 256, 256, 256, config)
        kernel = gm.matmul_kernel[grid](*args, **options)
        kernel._init_handles()
        out[name] = {"registers": kernel.n_regs, "spills": kernel.n_spills,
                     "shared": kernel.metadata.shared}
        print(f"  {name}: {kernel.n_regs} registers, {kernel.n_spills} spills, "
              f"{kernel.metadata.shared} bytes of shared memory")
    return out


def timings() -> tuple[list[dict], bool]:
    rows, ok = [], True
    for (M, N, K) in SHAPES:
        for dtype_name, dtype in DTYPES.items():
            pairs = cold_matmul_inputs(M, N, K, dtype)
            a, b = pairs[0]
            reference = a.double() @ b.double()
            variants = {"cuBLAS (torch.matmul)": torch.matmul, "triton_guide.matmul": tg.matmul}
            for name, config in gm.CONFIGS.items():
                variants[f"gluon {name}"] = (
                    lambda x, y, config=config: gm.gluon_matmul(x, y, config))
            row = {"shape": [M, N, K], "dtype": dtype_name, "tflops": {}, "error": {}}
            for name, fn in variants.items():
                error = relative_error(fn(a, b), reference)
                row["error"][name] = error
                if error > tolerance(dtype):
                    ok = False
                    print(f"  FAILED: {name} {dtype_name} {M}x{N}x{K}: relative error {error:.3g}")
                row["tflops"][name] = tflop_per_s(2 * M * N * K, gpu_ms(calls_on(fn, pairs)))
            del pairs, reference
            torch.cuda.empty_cache()
            rows.append(row)
    return rows, ok


def print_table(rows: list[dict]) -> None:
    names = list(rows[0]["tflops"])
    width = max(map(len, names)) + 2
    for row in rows:
        M, N, K = row["shape"]
        cublas = row["tflops"]["cuBLAS (torch.matmul)"]
        print(f"\n{M} x {N} x {K} (M x N x K), {row['dtype']}: TFLOP/s in GPU time, cold inputs")
        for name in names:
            rate = row["tflops"][name]
            print(f"  {name:<{width}}{rate:8.1f}  {rate / cublas:5.2f}x cuBLAS  "
                  f"(rel. error {row['error'][name]:.1e})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="where to write the results as JSON")
    out_path = parser.parse_args().out
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs an sm_90 GPU (H100, H200): the Gluon kernels use TMA and wgmma")
        return 2
    print(tg.runtime.describe())
    results = {"device": torch.cuda.get_device_name(), "triton": triton.__version__,
               "torch": torch.__version__}
    results["tests"] = run_test_module("tests/test_gluon_matmul.py")
    print("compiled on this GPU:")
    results["compiled"] = gpu_compiled()
    results["timings"], timings_ok = timings()
    print_table(results["timings"])
    out_path.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {out_path}")
    return 0 if results["tests"]["returncode"] == 0 and timings_ok else 1


if __name__ == "__main__":
    sys.exit(main())
