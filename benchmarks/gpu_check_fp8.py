"""triton_guide.fp8_matmul on an sm_90 GPU (H100, H200): checked, then timed against
``torch._scaled_mm`` and bf16 cuBLAS.

    python benchmarks/gpu_check_fp8.py OUT.json

1. What torch's casts to ``float8_e4m3fn`` give for values at and past 448, on this GPU and on
   the CPU (the reason quantize_fp8 clamps before casting).
2. ``tests/test_fp8_matmul.py`` run natively (pytest, in a child process): the kernel against
   float64 at odd sizes, per-tensor and per-row/column scales, float32 and bfloat16 outputs,
   the layouts, the mistakes and the refusals.
3. At 4096^3, 8192^3, 4096 x 11008 x 4096 and one odd shape (M x N x K), on random normal
   inputs: GPU time on cold copies (``triton_guide.benchmark.gpu_ms``, see docs/measuring.md)
   and the error against float64 of the unquantized inputs, of: ours with per-tensor and
   per-row/column scales (b stored by columns), ours with b stored by rows (the launcher's
   copy counted), ours with ``fast_accumulation``, ``torch._scaled_mm`` per tensor (with and
   without ``use_fast_accum``) and per row (reported as refused if this torch refuses it),
   and ``torch.matmul`` on bfloat16 copies (cuBLAS). Every output is bfloat16. Ours is also
   checked against float64 of its own dequantized inputs (the kernel's correctness: within
   bfloat16 rounding, plus the tensor cores' sum with fast accumulation).

torch._scaled_mm's schema (torch 2.11, as PyTorch's native_functions declares it):
``_scaled_mm(Tensor self, Tensor mat2, Tensor scale_a, Tensor scale_b, Tensor? bias=None,
Tensor? scale_result=None, ScalarType? out_dtype=None, bool use_fast_accum=False)``; mat2
stored by columns, scales float32 of shape () (per tensor) or (M, 1) and (1, N) (per row).

Prints a table; OUT.json gets the GPU and versions, the casts, the pytest summary and every
timing and error. About 2-3 minutes on an H100 (autotuning our kernel at four shapes is most
of it). Exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.pop("TRITON_GUIDE_RECORD", None)

from native_tests import run_test_module  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

import triton_guide as tg  # noqa: E402
from triton_guide.benchmark import gpu_ms, tflop_per_s  # noqa: E402
from triton_guide.benchmark.timing import copies_for_cold_cache  # noqa: E402
from triton_guide.fp8_matmul import (FP8, fp8_matmul, fp8_matmul_reference,  # noqa: E402
                                     quantize_fp8)
from triton_guide.testing import relative_error  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 11008, 4096), (3001, 4095, 2049)]
CAST_VALUES = [440.0, 448.0, 464.0, 470.0, 479.0, 480.0, 1000.0, float("inf"), float("nan")]
# Ours against float64 of its own dequantized inputs: bfloat16 rounding (2**-9 relative on
# average over a matrix, 2**-8 at most) plus the tensor cores' FP8 accumulation.
KERNEL_TOLERANCE = 2.0 ** -8
BF16 = torch.bfloat16
DEVICE = "cuda"


def casts() -> dict:
    out = {}
    for device in ("cuda", "cpu"):
        x = torch.tensor(CAST_VALUES, device=device)
        got = x.to(FP8).float().cpu().tolist()
        out[device] = dict(zip(map(str, CAST_VALUES), got))
        print(f"float32 -> float8_e4m3fn on {device}: "
              + ", ".join(f"{v:g} -> {g:g}" for v, g in zip(CAST_VALUES, got)))
    return out


def inputs(M: int, N: int, K: int) -> list[dict]:
    """Cold copies: each with float64-checkable float32 sources dropped after quantizing
    (only the first copy keeps them, for the errors)."""
    copies = copies_for_cold_cache((M * K + K * N) * 2)  # the bf16 copies are the largest
    out = []
    for i in range(copies):
        a = torch.randn(M, K, device=DEVICE)
        b = torch.randn(K, N, device=DEVICE)
        a_t, sa_t = quantize_fp8(a)
        b_t, sb_t = quantize_fp8(b)  # b stored by rows
        a_r, sa_r = quantize_fp8(a, per="row")
        b_c, sb_c = quantize_fp8(b, per="column")  # stored by columns
        copy = {"tensor": (a_t, b_t.t().contiguous().t(), sa_t, sb_t),
                "tensor, b by rows": (a_t, b_t, sa_t, sb_t),
                "row": (a_r, b_c, sa_r, sb_c),
                "bf16": (a.to(BF16), b.to(BF16))}
        if i == 0:
            copy["float64"] = a.double() @ b.double()
        out.append(copy)
        del a, b
    return out


def variants() -> dict:
    """name -> (which operands of a copy it takes, the call)."""
    def fast(a, b, sa, sb):
        return fp8_matmul(a, b, sa, sb, fast_accumulation=True)

    def scaled(fast):
        return lambda a, b, sa, sb: torch._scaled_mm(a, b, sa, sb, out_dtype=BF16,
                                                     use_fast_accum=fast)
    return {
        "ours, per tensor": ("tensor", fp8_matmul),
        "ours, per tensor, fast accum": ("tensor", fast),
        "ours, per row/column": ("row", fp8_matmul),
        "ours, per tensor, b by rows (copy counted)": ("tensor, b by rows", fp8_matmul),
        "_scaled_mm, per tensor, fast accum": ("tensor", scaled(True)),
        "_scaled_mm, per tensor": ("tensor", scaled(False)),
        "_scaled_mm, per row, fast accum": ("row", scaled(True)),
        "cuBLAS bf16 (torch.matmul)": ("bf16", torch.matmul),
    }


def measure(M: int, N: int, K: int) -> tuple[dict, bool]:
    copies = inputs(M, N, K)
    reference = copies[0]["float64"]
    row = {"shape": [M, N, K], "ms": {}, "tflops": {}, "error": {}, "kernel_error": {},
           "refused": {}}
    ok = True
    for name, (operands, fn) in variants().items():
        first = copies[0][operands]
        try:
            out = fn(*first)
        except (RuntimeError, ValueError, TypeError) as error:
            row["refused"][name] = str(error).splitlines()[0][:300]
            print(f"  {name}: refused: {row['refused'][name]}")
            continue
        row["error"][name] = relative_error(out, reference)
        if operands != "bf16":
            own = fp8_matmul_reference(*first)
            row["kernel_error"][name] = relative_error(out, own)
            # fast accumulation: the tensor cores' own sum, assumed to lose at most 2**-13
            # per 32-deep step (the check reports what it did lose)
            allowed = KERNEL_TOLERANCE + (2.0 ** -13 * K / 32 if "fast" in name else 0)
            if name.startswith("ours") and row["kernel_error"][name] > allowed:
                ok = False
                print(f"  FAILED: {name} {M}x{N}x{K}: relative error "
                      f"{row['kernel_error'][name]:.3g} against its dequantized inputs")
            del own
        del out
        calls = [lambda c=c: fn(*c[operands]) for c in copies]
        ms = gpu_ms(calls)
        row["ms"][name] = ms
        row["tflops"][name] = tflop_per_s(2 * M * N * K, ms)
    del copies, reference
    torch.cuda.empty_cache()
    return row, ok


def print_table(rows: list[dict]) -> None:
    for row in rows:
        M, N, K = row["shape"]
        cublas = row["tflops"].get("cuBLAS bf16 (torch.matmul)")
        scaled = row["tflops"].get("_scaled_mm, per tensor, fast accum")
        print(f"\n{M} x {N} x {K} (M x N x K), bf16 output: GPU time, cold inputs")
        print(f"  {'':<44}{'ms':>8}{'TFLOP/s':>9}{'/ bf16':>8}{'/ _sc_mm':>9}"
              f"{'err f64':>10}{'err deq':>10}")
        for name in variants():
            if name in row["refused"]:
                print(f"  {name:<44}refused: {row['refused'][name][:60]}")
                continue
            rate = row["tflops"][name]
            vs_bf16 = f"{rate / cublas:8.2f}" if cublas else f"{'-':>8}"
            vs_scaled = f"{rate / scaled:9.2f}" if scaled else f"{'-':>9}"
            deq = row["kernel_error"].get(name)
            print(f"  {name:<44}{row['ms'][name]:8.3f}{rate:9.1f}{vs_bf16}{vs_scaled}"
                  f"{row['error'][name]:10.2e}{'' if deq is None else f'{deq:10.2e}'}")
    print("\nerr f64: against float64 of the unquantized float32 inputs (what quantization "
          "and the output rounding cost); err deq: against float64 of the dequantized FP8 "
          "inputs (the kernel's own error)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="where to write the results as JSON")
    out_path = parser.parse_args().out
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        print("needs a GPU with FP8 tensor cores (sm_89 or later; written for sm_90)")
        return 2
    print(tg.runtime.describe())
    results = {"device": torch.cuda.get_device_name(), "triton": triton.__version__,
               "torch": torch.__version__,
               "scaled_mm_schema": str(torch.ops.aten._scaled_mm.default._schema)}
    print(f"torch._scaled_mm: {results['scaled_mm_schema']}")
    results["casts"] = casts()
    results["tests"] = run_test_module("tests/test_fp8_matmul.py")
    rows, timings_ok = [], True
    for shape in SHAPES:
        start = time.perf_counter()
        row, ok = measure(*shape)
        print(f"  {shape}: measured in {time.perf_counter() - start:.0f} s")
        rows.append(row)
        timings_ok &= ok
    results["timings"] = rows
    print_table(rows)
    out_path.write_text(json.dumps(results, indent=1))
    print(f"\nwrote {out_path}")
    return 0 if results["tests"]["returncode"] == 0 and timings_ok else 1


if __name__ == "__main__":
    sys.exit(main())
