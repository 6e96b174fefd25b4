"""``sweep_matmuls`` and ``matmul_variant`` on a GPU, against the hand-written variants the
matmul pages used before them.

    python benchmarks/gpu_check_sweep_matmuls.py OUT.json

**Checks**: each variant's call (float16 and bfloat16, B stored by rows and by columns, a
square and a ragged shape, as called and on cold copies) computes ``fn(a, b)`` on inputs of
the asked shape, dtype and layout, compared with a float64 product of the same inputs.

**Timing**: ``triton_guide.matmul`` and cuBLAS at 4096^3 float16 and at 2000 x 3000 x 1000
bfloat16, in GPU time (cold copies, CUDA graph) and as called, each through
``sweep_matmuls`` and through the variants the pages wrote by hand
(``calls_on(fn, cold_matmul_inputs(...))``, and a ``prepare`` that draws a and b and calls
``fn`` once), in the same run. The two ways time the same calls, so their TFLOP/s should
agree to within the run's spread; the table prints new over old for each.

Nothing is recorded (``TRITON_GUIDE_RECORD`` is ignored here). About a minute on an H100,
most of it autotuning. Results go to OUT.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from triton_guide import matmul, matmul_reference  # noqa: E402
from triton_guide.benchmark import (Benchmark, calls_on, cold_matmul_inputs,  # noqa: E402
                                    matmul_variant, on_cold_copies, sweep_matmuls,
                                    tflop_per_s)
from triton_guide.testing import assert_close, tolerance  # noqa: E402

SHAPES = {"4096^3": (4096, 4096, 4096), "2000x3000x1000": (2000, 3000, 1000)}


def checks(shapes=((333, 517, 1031), (1024, 1024, 1024)),
           dtypes=(torch.float16, torch.bfloat16)) -> list[dict]:
    found = []
    for dtype in dtypes:
        for by_columns in (False, True):
            for shape in shapes:
                for cold in (False, True):
                    seen = []

                    def kept(a, b):
                        seen.append((a, b))
                        return matmul(a, b)
                    prepare = matmul_variant(kept, lambda x, shape=shape: shape, dtype=dtype,
                                             b_by_columns=by_columns)
                    m, n, k = shape
                    made = (on_cold_copies(prepare, lambda x: (m * k + k * n) * dtype.itemsize)
                            if cold else prepare)("x")
                    call = made[-1] if cold else made
                    out = call()
                    a, b = seen[-1]
                    entry = {"dtype": str(dtype), "b_by_columns": by_columns,
                             "shape": shape, "cold": cold,
                             "calls": len(made) if cold else 1}
                    try:
                        assert a.shape == (m, k) and b.shape == (k, n), (a.shape, b.shape)
                        assert a.dtype == b.dtype == dtype
                        assert (b.stride(0) == 1) == by_columns, b.stride()
                        entry["error"] = assert_close(
                            out, matmul_reference(a.double(), b.double()),
                            rtol=tolerance(dtype, tensor_cores=True))
                        entry["ok"] = True
                    except AssertionError as failure:
                        entry["ok"], entry["failure"] = False, str(failure)
                    print(f"check {entry}")
                    found.append(entry)
                    del made, call, seen
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
    return found


def by_hand(fn, dtype, cold):
    """The variants as the pages wrote them before sweep_matmuls."""
    if cold:
        return lambda x: calls_on(fn, cold_matmul_inputs(*SHAPES[x], dtype))

    def prepare(x):
        m, n, k = SHAPES[x]
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        fn(a, b)
        return lambda: fn(a, b)
    return prepare


def timings() -> list[dict]:
    os.environ.pop("TRITON_GUIDE_RECORD", None)
    bench = Benchmark(__file__)
    print(bench.stamp())
    fns = {"matmul": matmul, "cuBLAS": matmul_reference}
    found = []
    for x, dtype, short in (("4096^3", torch.float16, "fp16"),
                            ("2000x3000x1000", torch.bfloat16, "bf16")):
        m, n, k = SHAPES[x]
        for gpu_time in (True, False):
            how = "GPU time" if gpu_time else "as called"
            new = sweep_matmuls(bench, f"new {short} {how}", [x], fns, shape=SHAPES.get,
                                dtype=dtype, gpu_time=gpu_time, label="shape", logx=False)
            old = bench.sweep(f"old {short} {how}", [x],
                              {name: by_hand(fn, dtype, gpu_time) for name, fn in fns.items()},
                              lambda x, ms: tflop_per_s(2 * m * n * k, ms), label="shape",
                              unit="TFLOP/s", ceiling=f"gemm_{short}", gpu_time=gpu_time)
            run_new, run_old = next(iter(new)), next(iter(old))
            for name in fns:
                entry = {"shape": x, "dtype": short, "timing": how, "variant": name,
                         "new_tflops": run_new[name][0], "old_tflops": run_old[name][0],
                         "new_over_old": run_new[name][0] / run_old[name][0]}
                found.append(entry)
            torch.cuda.empty_cache()
    print(f"{'shape':<16}{'dtype':<6}{'timing':<11}{'variant':<8}{'new':>8}{'old':>8}"
          f"{'new/old':>9}")
    for e in found:
        print(f"{e['shape']:<16}{e['dtype']:<6}{e['timing']:<11}{e['variant']:<8}"
              f"{e['new_tflops']:8.1f}{e['old_tflops']:8.1f}{e['new_over_old']:9.3f}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the results as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_check_sweep_matmuls needs a CUDA GPU")
    result = {"gpu": torch.cuda.get_device_name(), "checks": checks()}
    args.out.write_text(json.dumps(result, indent=1))
    result["timings"] = timings()
    args.out.write_text(json.dumps(result, indent=1))
    failed = [c for c in result["checks"] if not c["ok"]]
    off = [t for t in result["timings"] if not 0.9 <= t["new_over_old"] <= 1.1]
    print(f"checks: {len(result['checks']) - len(failed)} of {len(result['checks'])} passed; "
          f"timings: {len(result['timings']) - len(off)} of {len(result['timings'])} within "
          "10% of the hand-written variants")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
