"""The live path of the sweeps over a launch setting, on a GPU: the performance-habits page's
block-size sweep (``random_inputs_by_setting`` into ``memory_bound_sweep``) and the
pipelining page's stage sweeps (``random_inputs_by_setting`` into ``compute_bound_sweep``,
the matmul in GPU time on cold copies, the attention as called), each cut to a few settings.

    python benchmarks/gpu_check_setting_sweeps.py OUT.json

Checks, each printed PASS or FAIL: the calls that ``random_inputs_by_setting`` prepares
pass x as the setting and compute the right thing (the copy exact, the matmul and the
attention against torch in float32); ``compute_bound_sweep`` with ``cold_bytes`` hands
``gpu_time`` a list of calls on distinct inputs, as many as ``copies_for_cold_cache``
asks; every rate is finite and positive, the copy within reach of the copy ceiling and
the matmul of cuBLAS at 3 stages. Nothing is recorded (the Benchmark writes to a
temporary folder, and only with TRITON_GUIDE_RECORD=1, which this script refuses). Under
a minute on an H100; results go to OUT.json.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from triton_guide import matmul_reference
from triton_guide.benchmark import (Benchmark, compute_bound_sweep, copies_for_cold_cache,
                                    memory_bound_sweep, print_best_and_worst,
                                    print_share_and_gain, random_inputs_by_setting)
from triton_guide.copy import copy
from triton_guide.pipelining import launch_attention, launch_matmul

checks: list[dict] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    checks.append({"check": name, "ok": bool(ok), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)


def runs_of(results) -> list[dict]:
    return [{"gpu": run.gpu, "xs": run.xs, "series": run.series,
             "ceiling": run.ceiling.value if run.ceiling else None} for run in results]


def main(out: Path) -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    if os.environ.get("TRITON_GUIDE_RECORD"):
        print("unset TRITON_GUIDE_RECORD: this check records nothing")
        return 2
    bench = Benchmark(Path(__file__), results_dir=tempfile.mkdtemp(prefix="setting-sweeps-"))
    print(bench.stamp())
    found: dict = {"checks": checks}

    # The calls themselves: x reaches the setting, and they compute the right thing.
    n = 2**20 + 16
    copies = random_inputs_by_setting({"4 warps": functools.partial(copy, num_warps=4)},
                                      "block_size", n)["4 warps"]
    for block_size in (256, 4096):
        call = copies(block_size)
        check(f"copy, block_size={block_size}: keyword passed, exact",
              call.keywords.get("block_size") == block_size and torch.equal(call(), call.args[0]))
    size = 1024
    matmul = random_inputs_by_setting({"4 warps": functools.partial(launch_matmul, num_warps=4)},
                                      "num_stages", (size, size), (size, size),
                                      dtype=torch.float16)["4 warps"]
    for stages in (2, 4):
        call = matmul(stages)
        a, b = call.args
        error = ((call()[0].float() - a.float() @ b.float()).abs().max()
                 / (a.float() @ b.float()).abs().max()).item()
        check(f"matmul, num_stages={stages}: against float32", error < 1e-2, f"{error:.1e}")
    qkv = (1, 2, 1024, 128)
    attention = random_inputs_by_setting(
        {"4 warps": functools.partial(launch_attention, num_warps=4)}, "num_stages",
        qkv, qkv, qkv, dtype=torch.float16, warm=True)["4 warps"](2)
    q, k, v = attention.args
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    error = (attention()[0].float() - expected).abs().max().item()
    check("attention, num_stages=2: against SDPA in float32", error < 1e-2, f"{error:.1e}")

    # The block-size sweep, as the performance-habits page makes it, cut to three sizes.
    timed_n = 2**26
    by_warps = {f"{w} warps": functools.partial(copy, num_warps=w) for w in (1, 4, 16)}
    blocks = memory_bound_sweep(bench, "block size and num_warps (check)", [128, 1024, 4096],
                                random_inputs_by_setting(by_warps, "block_size", timed_n),
                                lambda _: 2 * 4 * timed_n, label="BLOCK_SIZE")
    print_best_and_worst(blocks)
    run = next(iter(blocks))
    best = max(max(values) for values in run.series.values())
    check("copy sweep: every rate finite and positive",
          all(math.isfinite(v) and v > 0 for values in run.series.values() for v in values))
    check("copy sweep: best within reach of the copy ceiling", best > 0.7 * run.ceiling.value,
          f"{best:,.0f} of {run.ceiling.value:,.0f} GB/s")
    found["block size"] = runs_of(blocks)

    # The matmul stage sweep in GPU time on cold copies, as the pipelining page makes it.
    size = 4096
    matmuls = {"4 warps": functools.partial(launch_matmul, num_warps=4),
               "cuBLAS": lambda a, b, num_stages: matmul_reference(a, b)}
    variants = random_inputs_by_setting(matmuls, "num_stages", (size, size), (size, size),
                                        dtype=torch.float16)
    seen = []

    class Spy:  # what compute_bound_sweep hands to Benchmark.sweep, then the real sweep
        def sweep(self, title, xs, variants, rate, **options):
            seen.append((variants, options))
            return bench.sweep(title, xs, variants, rate, **options)

    stages = compute_bound_sweep(Spy(), "matmul by stages (check)", [1, 3], variants,
                                 lambda _: 2 * size**3, cold_bytes=lambda _: 4 * size**2,
                                 label="num_stages", logx=False)
    handed, options = seen[0]
    calls = handed["4 warps"](3)
    distinct = len({call.args[0].data_ptr() for call in calls})
    check("matmul sweep: gpu_time on distinct cold copies",
          options["gpu_time"] and len(calls) == copies_for_cold_cache(4 * size**2) == distinct,
          f"{len(calls)} calls, {distinct} distinct inputs")
    del calls
    share = print_share_and_gain(stages, "cuBLAS", step_to=3)
    run = next(iter(stages))
    check("matmul sweep: every rate finite and positive",
          all(math.isfinite(v) and v > 0 for values in run.series.values() for v in values))
    at_three = share[run.gpu]["4 warps"][3]
    check("matmul sweep: 3 stages reach half of cuBLAS or more", at_three > 0.5,
          f"{at_three:.0%}")
    found["matmul"] = runs_of(stages)

    # The attention stage sweep as called, beside cuDNN, at the page's size.
    def cudnn(q, k, v, num_stages):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v)

    qkv = (4, 32, 4096, 128)
    attentions = compute_bound_sweep(
        bench, "attention by stages (check)", [1, 2],
        random_inputs_by_setting({"4 warps": functools.partial(launch_attention, num_warps=4),
                                  "SDPA cuDNN": cudnn}, "num_stages", qkv, qkv, qkv,
                                 dtype=torch.float16, warm=True),
        lambda _: 4 * 4 * 32 * 4096**2 * 128, label="num_stages", logx=False)
    print_share_and_gain(attentions, "SDPA cuDNN", step_to=2)
    run = next(iter(attentions))
    check("attention sweep: every rate finite and positive",
          all(math.isfinite(v) and v > 0 for values in run.series.values() for v in values))
    found["attention"] = runs_of(attentions)

    out.write_text(json.dumps(found, indent=1))
    failed = [c["check"] for c in checks if not c["ok"]]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed; written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
