"""Attention as models call it, on a GPU: every new path checked against float64, then
decode timed against PyTorch's SDPA.

    python benchmarks/gpu_check_attention.py OUT.json [--part checks|decode|all]
                                                      [--budget-s 230] [--all-configs]

**Checks** (natively, each against ``attention_reference`` in float64, forward and
backward unless said): odd and unequal lengths both ways, causal and not; more queries
than keys (rows that see no key must be exactly 0, log-sum-exp -inf); GQA and MQA; head
dims 40, 160 and 256; the sliding window; the log-sum-exp and its gradient; flash-decoding
with the split forced and chosen; extreme but finite ``sm_scale`` (forward on the main and
the decode path; forward and backward on the main path); float32 under
``torch.set_float32_matmul_precision("highest")`` and ``("high")``, with the forward's GPU
time under each at one large shape. A failed check prints its message and the run goes on.
Each main kernel compiles only the first of its tuned configurations (``--all-configs``:
autotune as usual, which compiles three or four times as many kernels).

**Decode timing**: batch 1, 8, 64; 32 query heads on 4 key/value heads (GQA 8:1); head_dim
128; 1, 4, 16 queries; 4k, 32k, 128k keys; fp16 and bf16; no mask (with one query the
causal mask hides nothing, and SDPA's ``is_causal`` is aligned top-left, unlike ours).
Ours against ``scaled_dot_product_attention(..., enable_gqa=True)`` under the flash and
the cuDNN backends (a backend that refuses the call is reported as such). Two times per
call: GPU time (``triton_guide.benchmark.gpu_ms``: calls replayed from a CUDA graph, the
host left out; inputs that fit 256 MiB get rotating copies so each call reads from HBM) and
as called (a Python loop of calls, wall clock, one synchronisation at the end, per call),
the median of three rounds in which the variants take turns. The SDPA backend is chosen
once around each measurement (``sdpa_kernel``), not per call. Shapes whose keys and values
do not fit in memory are skipped; so are the rest once ``--budget-s`` seconds have passed.

Results go to OUT.json as they come (a run cut off keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import math
import sys
import time
import traceback
from pathlib import Path
from statistics import median

import torch
import torch.nn.functional as F
from triton import next_power_of_2 as triton_next_power_of_2
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from triton_guide.benchmark import gpu_ms  # noqa: E402
from triton_guide.hardware import multiprocessors  # noqa: E402
from triton_guide.precision import dot_input_precision  # noqa: E402
from triton_guide.testing import assert_close, relative_error, tolerance  # noqa: E402

A = importlib.import_module("triton_guide.attention")
D = importlib.import_module("triton_guide.attention_decode")
RESULTS: dict = {}
OUT: Path | None = None
START = time.perf_counter()


def save() -> None:
    OUT.write_text(json.dumps(RESULTS, indent=1) + "\n")


def rtol_for(dtype: torch.dtype) -> float:
    return tolerance(dtype, tensor_cores=True)  # follows PyTorch's float32 setting


# ---------------------------------------------------------------------------------------
# checks

DEVICE = "cuda"


def make(batch, heads, kv_heads, nq, nk, d, dtype):
    q = torch.randn(batch, heads, nq, d, device=DEVICE, dtype=dtype)
    k, v = (torch.randn(batch, kv_heads, nk, d, device=DEVICE, dtype=dtype) for _ in range(2))
    return q, k, v


def compare(q, k, v, *, causal=False, window=None, lse=False, sm_scale=None, backward=True):
    """Errors of out (and lse, dq, dk, dv) against float64; raises AssertionError on a
    failure. Returns {name: relative error}."""
    errors = {}
    q, k, v = (t.detach().requires_grad_(backward) for t in (q, k, v))
    q64, k64, v64 = (t.detach().double().requires_grad_(backward) for t in (q, k, v))
    options = dict(causal=causal, window=window, sm_scale=sm_scale, return_lse=True)
    out, out_lse = tg.attention(q, k, v, **options)
    ref, ref_lse = tg.attention_reference(q64, k64, v64, **options)
    rtol = rtol_for(q.dtype)
    if not torch.isfinite(out).all():
        raise AssertionError(f"out has {int((~torch.isfinite(out)).sum())} non-finite elements")
    errors["out"] = assert_close(out, ref, rtol=rtol, name="out")
    if lse:
        finite = ref_lse.abs() < 3e38
        # float32 scores multiplied in full precision give the LSE to 1e-5; as tf32 ("high")
        # they carry tf32's own error, which the precision-aware tolerance allows for.
        full = q.dtype == torch.float32 and dot_input_precision(q.dtype) != "tf32"
        errors["lse"] = assert_close(out_lse[finite], ref_lse[finite],
                                     rtol=1e-5 if full else rtol, name="lse")
    if not backward:
        return errors
    grad_out = torch.randn_like(out)
    loss, ref_loss = (out * grad_out).sum(), (ref * grad_out.double()).sum()
    if lse:
        seen = ref_lse > -math.inf
        grad_lse = torch.randn_like(out_lse) * seen
        loss = loss + (out_lse.masked_fill(~seen, 0) * grad_lse).sum()
        ref_loss = ref_loss + (ref_lse.masked_fill(~seen, 0) * grad_lse.double()).sum()
    loss.backward()
    ref_loss.backward()
    for name, ours, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad),
                             ("dv", v.grad, v64.grad)):
        if not torch.isfinite(ours).all():
            raise AssertionError(f"{name} has non-finite elements")
        atol = rtol * max(want.abs().max().item(), 0.1)
        errors[name] = assert_close(ours, want, rtol=rtol, atol=atol, name=name)
    return errors


def check(name, fn):
    """Run one check, print and record its outcome."""
    started = time.perf_counter()
    entry = {"check": name}
    try:
        entry["errors"] = fn() or {}
        entry["ok"] = True
    except Exception as error:  # a failed check is reported, the run goes on
        entry["ok"] = False
        entry["message"] = f"{type(error).__name__}: {error}"
        if not isinstance(error, AssertionError):
            entry["traceback"] = traceback.format_exc(limit=-3)
    entry["seconds"] = round(time.perf_counter() - started, 2)
    errors = "  ".join(f"{k} {v:.2e}" for k, v in entry.get("errors", {}).items())
    status = "ok  " if entry["ok"] else "FAIL"
    print(f"{status} {name:<58} {errors}{'' if entry['ok'] else '  ' + entry['message'][:300]}"
          f"  ({entry['seconds']:.1f} s)", flush=True)
    RESULTS.setdefault("checks", []).append(entry)
    save()


def empty_rows():
    # 300 queries, 120 keys, causal bottom-right: the first 180 queries see no key.
    q, k, v = make(1, 4, 2, 300, 120, 64, torch.float16)
    out, lse = tg.attention(q, k, v, causal=True, return_lse=True)
    if not (out[:, :, :180] == 0).all() or not (lse[:, :, :180] == -math.inf).all():
        raise AssertionError("rows that see no key are not 0 / -inf")
    return compare(q, k, v, causal=True, lse=True)


def decode(dtype, nq, nk, splits, causal=False, window=0, d=128, sm_scale=None):
    def run():
        q, k, v = make(2, 32, 4, nq, nk, d, dtype)
        scale = sm_scale if sm_scale is not None else 1 / math.sqrt(d)
        out, lse, stats = D.attention_decode(q, k, v, causal, scale, window, num_splits=splits)
        ref, ref_lse = tg.attention_reference(*(t.double() for t in (q, k, v)), causal=causal,
                                              window=window or None, sm_scale=scale,
                                              return_lse=True)
        if not torch.isfinite(out).all():
            raise AssertionError("decode out has non-finite elements")
        finite = ref_lse.abs() < 3e38
        return {"out": assert_close(out, ref, rtol=rtol_for(dtype), name="out"),
                "lse": assert_close(lse[finite], ref_lse[finite], rtol=rtol_for(dtype),
                                    name="lse")}
    return run


def extreme_backward(sm_scale, dtype):
    """The backward at an extreme scale against float64: dq and dk are sm_scale times
    p * (dP - delta), whose float32 rounding would swamp the exact answer (about 0) where
    the softmax is one-hot, had the kernels not settled those entries (SETTLE_ONE_HOT)."""
    def run():
        q, k, v = make(1, 4, 2, 200, 300, 64, dtype)
        return compare(q, k, v, causal=True, sm_scale=sm_scale)
    return run


def float32_setting(setting, nq):
    def run():
        before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(setting)
        try:
            q, k, v = make(2, 8, 2, nq, 700, 64, torch.float32)
            return compare(q, k, v, causal=True, lse=True)
        finally:
            torch.set_float32_matmul_precision(before)
    return run


def first_config_only():
    """Autotune nothing: each main kernel compiles only the first of its configurations
    for the call's head_dim and dtype (the checks' ~30 kernel variants times 3-4
    configurations would take most of the time budget to compile)."""
    for kernel in (A.attention_forward_kernel, A.attention_backward_dkdv_kernel,
                   A.attention_backward_dq_kernel):
        prune = kernel.early_config_prune
        if prune is None:  # one configuration already (the interpreter's)
            continue
        kernel.early_config_prune = (
            lambda configs, named_args, prune=prune, **kwargs:
            prune(configs, named_args, **kwargs)[:1])


def checks():
    f16, bf16 = torch.float16, torch.bfloat16
    for nq, nk in ((300, 517), (517, 300)):
        for causal in (False, True):
            check(f"fp16 B2 H8/Hk2 Nq{nq} Nk{nk} d64 {'causal' if causal else 'full'}",
                  lambda nq=nq, nk=nk, c=causal: compare(*make(2, 8, 2, nq, nk, 64, f16),
                                                         causal=c))
    check("fp16 Nq300 > Nk120 causal: empty rows 0, lse -inf", empty_rows)
    check("fp16 MQA H8/Hk1 N257 d128 causal",
          lambda: compare(*make(1, 8, 1, 257, 257, 128, f16), causal=True))
    check("bf16 GQA H16/Hk4 Nq333 Nk1000 d128 causal lse",
          lambda: compare(*make(1, 16, 4, 333, 1000, 128, bf16), causal=True, lse=True))
    for d, dtypes in ((40, (f16,)), (160, (f16,)), (256, (f16, bf16))):
        for dtype in dtypes:
            name = str(dtype).removeprefix("torch.")
            check(f"{name} d{d} H4/Hk2 Nq200 Nk333 causal lse",
                  lambda d=d, dtype=dtype: compare(*make(1, 4, 2, 200, 333, d, dtype),
                                                   causal=True, lse=True))
    for window in (1, 64, 700):
        check(f"fp16 window {window} H8/Hk2 Nq400 Nk1000 d64 lse",
              lambda w=window: compare(*make(1, 8, 2, 400, 1000, 64, f16), causal=True,
                                       window=w, lse=True))
    check("fp16 lse and its gradient, full, Nq129 Nk77",
          lambda: compare(*make(2, 4, 4, 129, 77, 64, f16), lse=True))
    for dtype in (f16, bf16):
        name = str(dtype).removeprefix("torch.")
        for nq in (1, 4, 16):
            for splits in (None, 7):
                check(f"{name} decode H32/Hk4 Nq{nq} Nk5001 d128 splits {splits or 'auto'}",
                      decode(dtype, nq, 5001, splits))
        check(f"{name} decode Nq4 Nk5001 causal window 1000 splits auto",
              decode(dtype, 4, 5001, None, causal=True, window=1000))
    check("fp16 decode d256 Nq2 Nk3000 causal splits 5", decode(f16, 2, 3000, 5, causal=True,
                                                                d=256))
    check("fp16 decode path through attention(): forward and backward, Nq3 Nk2000",
          lambda: compare(*make(2, 8, 2, 3, 2000, 128, f16), causal=True, lse=True))
    for scale in (1e-50, 1e-30, 1e-6, 1e3, 1e20, 1e30, 1e38):
        check(f"fp16 sm_scale {scale:g} main path forward",
              lambda s=scale: compare(*make(1, 4, 2, 300, 517, 64, f16), causal=True,
                                      sm_scale=s, lse=True, backward=False))
        check(f"fp16 sm_scale {scale:g} decode path forward",
              decode(f16, 4, 3001, None, causal=True, sm_scale=scale))
    check("fp32 sm_scale 1e20 main path forward (highest)",
          lambda: compare(*make(1, 4, 2, 300, 517, 64, torch.float32), causal=True,
                          sm_scale=1e20, lse=True, backward=False))
    # Scales that make every row uniform or one-hot; in between (1e3, say) the answer is as
    # sensitive to the scores' float32 rounding as the scale is large (see the unit tests).
    for scale in (1e-50, 1e20, 1e38):
        for dtype in (torch.float32, f16):
            name = str(dtype).removeprefix("torch.")
            check(f"{name} sm_scale {scale:g} forward and backward", extreme_backward(scale, dtype))
    for setting in ("highest", "high"):
        for nq in (300, 4):
            check(f"fp32 '{setting}' Nq{nq} Nk700 d64 causal lse", float32_setting(setting, nq))
    precision_cost()


def precision_cost():
    """GPU time of the float32 forward under each setting, at one large shape."""
    shape = (4, 16, 4096, 64)
    q, k, v = (torch.randn(shape, device="cuda") for _ in range(3))
    before = torch.get_float32_matmul_precision()
    times = {}
    try:
        for setting in ("highest", "high"):
            torch.set_float32_matmul_precision(setting)
            times[setting] = gpu_ms([lambda: tg.attention(q, k, v)])
    finally:
        torch.set_float32_matmul_precision(before)
    flops = 4 * math.prod(shape) * shape[2]
    line = ", ".join(f"'{s}' {ms:.3f} ms ({flops / ms / 1e9:.0f} TFLOP/s)"
                     for s, ms in times.items())
    print(f"fp32 forward B4 H16 N4096 d64 GPU time: {line}", flush=True)
    RESULTS["float32_precision_cost"] = {"shape": shape, "gpu_ms": times}
    save()


# ---------------------------------------------------------------------------------------
# decode timing

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}
COLD_BYTES = 256 * 2**20


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def backend(name):
    """The SDPA backend ``name`` in force (entered once around a measurement, not per call,
    so SDPA's as-called time does not include the context manager); nothing for ours."""
    return sdpa_kernel(BACKENDS[name]) if name in BACKENDS else contextlib.nullcontext()


def called_us(fn, target_s=0.05):
    """Per-call wall time of a Python loop of calls, one synchronisation at the end."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = time.perf_counter() - start
    calls = max(5, min(200, int(target_s / max(once, 1e-6))))
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def decode_timing(budget_s):
    heads, kv_heads, d = 32, 4, 128
    print("\ndecode: GQA 32/4, d128, no mask; us per call (GPU time | as called); "
          "ratio = SDPA time / ours (above 1: ours faster)", flush=True)
    free, _ = torch.cuda.mem_get_info()
    # Both dtypes at each shape before the next, so a run cut short by the budget has both.
    for batch, nk, dtype in itertools.product((1, 8, 64), (4096, 32768, 131072),
                                              (torch.float16, torch.bfloat16)):
        dtype_name = str(dtype).removeprefix("torch.")
        kv_bytes = 2 * batch * kv_heads * nk * d * 2
        copies = max(1, math.ceil(COLD_BYTES / kv_bytes))
        if (copies + 1) * kv_bytes > 0.8 * free:
            print(f"{dtype_name} B{batch} Nk{nk}: skipped, keys and values "
                  f"({kv_bytes / 2**30:.1f} GiB) do not fit", flush=True)
            continue
        inputs = [make(batch, heads, kv_heads, 16, nk, d, dtype) for _ in range(copies)]
        for nq in (1, 4, 16):
            if time.perf_counter() - START > budget_s:
                print(f"budget of {budget_s} s spent: stopping", flush=True)
                RESULTS.setdefault("notes", []).append(
                    f"decode timing stopped at {dtype_name} B{batch} Nk{nk} Nq{nq}: "
                    f"budget {budget_s} s")
                save()
                return
            one_row(dtype_name, batch, nk, nq, [(q[:, :, :nq], k, v)
                                                 for q, k, v in inputs])
        del inputs
        torch.cuda.empty_cache()


def one_row(dtype_name, batch, nk, nq, inputs):
    fns = {"ours": tg.attention} | {name: sdpa for name in BACKENDS}
    q, k, v = inputs[0]
    notes = {}
    for name in list(fns):
        try:
            with backend(name):
                out = fns[name](q, k, v)
            torch.cuda.synchronize()
            if name != "ours":  # the same answer as ours, or the comparison means nothing
                assert_close(out, tg.attention(q, k, v).float(), rtol=rtol_for(q.dtype))
        except Exception as error:
            notes[name] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            del fns[name]
    gpu = {name: [] for name in fns}
    called = {name: [] for name in fns}
    for _ in range(3):
        for name, fn in fns.items():
            with backend(name):
                gpu[name].append(gpu_ms([lambda x=x, fn=fn: fn(*x) for x in inputs],
                                        replays=10) * 1e3)
                called[name].append(called_us(lambda fn=fn: fn(q, k, v)))
    gpu = {name: median(values) for name, values in gpu.items()}
    called = {name: median(values) for name, values in called.items()}
    kv_bytes = 2 * k.numel() * k.element_size()
    block_n = D.decode_block_n(triton_next_power_of_2(k.shape[3]), k.element_size())
    splits = D.decode_splits(batch * k.shape[1], nk, block_n, multiprocessors(q.device))[0] \
        if D.uses_decode(q, k) else None
    entry = {"dtype": dtype_name, "batch": batch, "num_queries": nq, "num_keys": nk,
             "splits": splits, "gpu_us": gpu, "called_us": called,
             "ours_gb_per_s": kv_bytes / gpu["ours"] / 1e3, "refused": notes}
    RESULTS.setdefault("decode", []).append(entry)
    save()
    cells = "  ".join(
        f"{name} {gpu[name]:8.1f} | {called[name]:7.1f}"
        + ("" if name == "ours" else f" ({gpu[name] / gpu['ours']:4.2f}x | "
                                     f"{called[name] / called['ours']:4.2f}x)")
        for name in fns)
    refused = "".join(f"  [{name} refused: {why}]" for name, why in notes.items())
    print(f"{dtype_name} B{batch:<2} Nq{nq:<2} Nk{nk:<6} splits {splits}  {cells}  "
          f"ours {entry['ours_gb_per_s']:.0f} GB/s{refused}", flush=True)


def main():
    global OUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write the JSON results")
    parser.add_argument("--part", choices=["checks", "decode", "all"], default="all")
    parser.add_argument("--budget-s", type=float, default=230,
                        help="stop starting decode timings after this many seconds")
    parser.add_argument("--all-configs", action="store_true",
                        help="check every autotuned configuration's pick, not only the first "
                             "configuration of each kernel (slower: more compilations)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu_check_attention.py needs a CUDA GPU")
    OUT = args.out
    RESULTS["device"] = tg.runtime.describe()
    RESULTS["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    print(RESULTS["device"], flush=True)
    torch.manual_seed(0)
    if args.part in ("checks", "all"):
        if not args.all_configs:
            first_config_only()
        RESULTS["configs"] = "all, autotuned" if args.all_configs else "first of each kernel"
        checks()
        failed = [c["check"] for c in RESULTS["checks"] if not c["ok"]]
        print(f"\nchecks: {len(RESULTS['checks']) - len(failed)} ok, {len(failed)} failed "
              f"({time.perf_counter() - START:.0f} s so far)", flush=True)
    if args.part in ("decode", "all"):
        decode_timing(args.budget_s)
    RESULTS["seconds"] = round(time.perf_counter() - START, 1)
    save()
    print(f"done in {RESULTS['seconds']} s; results in {OUT}")


if __name__ == "__main__":
    main()
