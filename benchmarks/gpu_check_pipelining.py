"""The pipelining page (examples/hopper/02_pipelining.py) on a GPU, before recording it.

    python benchmarks/gpu_check_pipelining.py OUT.json

0. ``warp_specialize=True`` compiled once for each kernel in a child process, so that a
   compiler crash or hang is reported (and stops the run) instead of killing it.
1. bfloat16 checks the page does not make: every variant of the page's matmul and
   attention kernels at one stage count, against float64, at odd sizes.
2. The page itself, run as the site builds it (live timings, nothing recorded): it checks
   every variant at every stage count in float16 against float64, prints the shared
   memory the compiler allocated and whether it split the loop into warp partitions, and
   times the matmul against cuBLAS and the attention forward against SDPA's cuDNN backend.
   Its tables and takeaways print here exactly as the page will show them.

OUT.json gets the GPU and versions, every check's outcome (relative error and the
compiler's numbers, or the type of what was raised) and every timing (TFLOP/s per variant
and stage count, the vendor's, the ceiling). About 2-3 minutes on an H100, most of it
compiling. Exit status 1 when a check failed or the page raised.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "examples" / "hopper" / "02_pipelining.py"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.pop("TRITON_GUIDE_RECORD", None)  # check, do not record

import torch  # noqa: E402
import triton  # noqa: E402

from triton_guide import attention_reference, matmul_reference  # noqa: E402
from triton_guide.pipelining import (check_variants, launch_attention, launch_matmul,  # noqa: E402
                                     print_outcomes, warp_specialize_refusal)
from triton_guide.testing import tolerance  # noqa: E402


def runs_as_json(results) -> list[dict]:
    return [{"gpu": run.gpu, "x": run.xs, "series": run.series, "unit": run.unit,
             "ceiling": vars(run.ceiling) if run.ceiling else None, "live": run.live}
            for run in results]


def bfloat16_checks(warp_specialize: bool) -> dict:
    """Every page variant once more, in bfloat16, at 2 stages (the warp-specialised ones
    only where ``warp_specialize``: the probe compiled and ran them)."""
    torch.manual_seed(1)
    matmul_variants = {"4 warps": dict(num_warps=4), "8 warps": dict(num_warps=8),
                       "4 warps, warp-specialised": dict(num_warps=4, warp_specialize=True)}
    attention_variants = {"4 warps": dict(num_warps=4), "8 warps": dict(num_warps=8),
                          "8 warps, warp-specialised": dict(num_warps=8, warp_specialize=True)}
    for variants in (matmul_variants, attention_variants):
        for name in [name for name in variants if not warp_specialize and "specialised" in name]:
            del variants[name]
    out = {}
    a = torch.randn(517, 1031, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1031, 263, device="cuda", dtype=torch.bfloat16)
    print("matmul 517 x 263 x 1031, bfloat16:")
    out["matmul"] = check_variants(launch_matmul, (a, b),
                                   matmul_reference(a.double(), b.double()),
                                   tolerance(torch.bfloat16, tensor_cores=True),
                                   matmul_variants, [2])
    print_outcomes(out["matmul"])
    q, k, v = (torch.randn(1, 3, 333, 128, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    print("attention (1, 3, 333, 128), bfloat16:")
    out["attention"] = check_variants(
        launch_attention, (q, k, v), attention_reference(q.double(), k.double(), v.double()),
        tolerance(torch.bfloat16, tensor_cores=True), attention_variants, [2])
    print_outcomes(out["attention"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the results (JSON)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: this script checks the page natively; nothing to do")
        return 2
    report = {"gpu": torch.cuda.get_device_name(), "capability": torch.cuda.get_device_capability(),
              "triton": triton.__version__, "torch": torch.__version__, "failed": []}
    started = time.time()

    def save():
        report["seconds"] = round(time.time() - started, 1)
        args.out.write_text(json.dumps(report, indent=1, default=str) + "\n")

    print(f"== warp_specialize=True in a child process ({report['gpu']}, triton "
          f"{triton.__version__})", flush=True)
    refusal = warp_specialize_refusal(timeout_s=60)
    report["warp_specialize"] = refusal or "compiled and ran"
    print(report["warp_specialize"], flush=True)
    save()

    print("\n== bfloat16 checks", flush=True)
    try:
        report["bfloat16"] = bfloat16_checks(refusal is None)
    except Exception as error:
        traceback.print_exc()
        report["failed"].append(f"bfloat16 checks: {type(error).__name__}: {error}")
    save()

    print(f"\n== the page, as the site runs it ({time.time() - started:.0f} s so far)", flush=True)
    sys.argv = [str(PAGE)]  # Benchmark() finds its page here
    try:
        page = runpy.run_path(str(PAGE), run_name="__main__")
        report["float16"] = {"matmul": page["matmul_outcomes"],
                             "attention": page["attention_outcomes"]}
        report["timings"] = {"matmul": runs_as_json(page["matmul_runs"]),
                             "attention": runs_as_json(page["attention_runs"])}
    except Exception as error:
        traceback.print_exc()
        report["failed"].append(f"page: {type(error).__name__}: {error}")
    save()
    print(f"\n{len(report['failed'])} failure(s); {time.time() - started:.0f} s; "
          f"results in {args.out}")
    for failure in report["failed"]:
        print(f"  FAILED {failure}")
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
