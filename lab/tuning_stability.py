"""Does the autotuner pick the same configuration in every fresh process? For a few shapes
that the configurations were not chosen on, run each in N fresh processes, once with
Triton's own tuning benchmark and once with every autotuner timing by CUDA-graph replay
(``do_bench_cudagraph``: no host time in the reading), and print each process's pick and
GPU time, and the spread (max / min) per shape and way.

    python lab/tuning_stability.py [--processes 4]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CASES = ["attention_d64_causal_n1024_b3h7", "matmul_1000", "matmul_2000x3000x1000"]


def child(case: str, way: str) -> None:
    import torch
    import triton
    from triton.runtime import Autotuner

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import triton_guide as tg

    tuned = [value for name, module in list(sys.modules.items())
             if name.startswith("triton_guide.") for value in vars(module).values()
             if isinstance(value, Autotuner)]
    if way == "graph":
        for kernel in tuned:
            kernel.do_bench = lambda call, quantiles: triton.testing.do_bench_cudagraph(
                call, rep=100, quantiles=quantiles)
    torch.manual_seed(0)
    half = torch.float16
    if case.startswith("attention"):
        q, k, v = (torch.randn(3, 7, 1024, 64, device="cuda", dtype=half) for _ in range(3))
        call = lambda: tg.attention(q, k, v, causal=True)  # noqa: E731
    else:
        m, n, k_ = (1000, 1000, 1000) if case == "matmul_1000" else (2000, 3000, 1000)
        a = torch.randn(m, k_, device="cuda", dtype=half)
        b = torch.randn(k_, n, device="cuda", dtype=half)
        call = lambda: tg.matmul(a, b)  # noqa: E731
    call()  # tunes
    picks = sorted(str(kernel.best_config) for kernel in tuned
                   if getattr(kernel, "best_config", None) is not None)
    ms = triton.testing.do_bench_cudagraph(call, rep=200)
    print(json.dumps({"case": case, "way": way, "ms": ms, "picks": picks}))


def main(processes: int) -> None:
    results = {}
    for case in CASES:
        for way in ("triton", "graph"):
            for _ in range(processes):
                out = subprocess.run([sys.executable, __file__, "--child", case, way],
                                     capture_output=True, text=True, check=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                results.setdefault((case, way), []).append(row)
                print(f"{case:<34} {way:<7} {row['ms'] * 1e3:9.1f} us  {row['picks']}",
                      flush=True)
    print("\nspread of the GPU time over fresh processes (max / min):")
    for (case, way), rows in results.items():
        times = [r["ms"] for r in rows]
        picks = len({tuple(r["picks"]) for r in rows})
        print(f"  {case:<34} {way:<7} {max(times) / min(times):6.3f}   "
              f"{picks} distinct pick{'s' * (picks != 1)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        main(int(sys.argv[sys.argv.index("--processes") + 1]) if "--processes" in sys.argv
             else 4)
