"""Time every op against its PyTorch baseline over the shape sets of the performance goals;
print one row per shape and, per op, the geometric mean and the worst ratio.

    python benchmarks/report.py [--only add softmax matmul precision attention decode host]
                                [--dtypes fp16 bf16]
                                [--lengths 1024 ...] [--rounds 3] [--quick] [--save FILE]
    python benchmarks/report.py --merge FILE [FILE ...]
    python benchmarks/report.py --processes 5 --only matmul ...   (the same in 5 processes)

The whole report takes longer than one ten-minute call on a rented GPU: run it in parts
(``--only``, ``--dtypes``, ``--lengths``), each with ``--save part.json``, then ``--merge``
the parts for the geometric means over all of them (no GPU needed).

Ratios are ours / baseline, both measured in this run, with the ceilings (copy bandwidth, a
large cuBLAS GEMM) measured first. Softmax is also set against a copy of its own bytes, timed
the same way, since a smaller copy falls short of the 1 GiB copy's rate too. The first call
of each matmul shape includes the autotuner's compilations and timings: its wall time is
printed as ``tune``. Matmul runs a second time with b stored column by column
(``x @ w.t()``), tallied apart. ``precision``: one float32 product under PyTorch's float32
matmul settings "highest" and "high", which ours follows (:mod:`triton_guide.precision`),
ours and cuBLAS's rates and errors, printed apart from the tallies. Needs a CUDA GPU.

Decode (few queries against a long KV cache, grouped heads) is set against SDPA with
``enable_gqa=True`` under the flash and cuDNN backends, in GB/s of the cache read; a backend
that refuses the call is named in its row.

Softmax, matmul, the attention forward and decode are timed two ways. The main columns are GPU time
(``gpu_ms``: calls on rotating copies of the inputs, replayed from a CUDA graph, so the L2
cache is cold and the host's launch time is left out): what the kernels cost. ``as called``
is ``do_bench`` on one call as a Python program makes it: where a kernel takes less time
than the host needs to launch it, that column times the host, ours and torch's alike. The
attention backward is ``torch.autograd.grad`` (which returns the gradients instead of adding
them into ``.grad``: that sum is three elementwise kernels, no part of attention), timed in
GPU time by ``queued_ms`` (the calls queued behind a GPU sleep, on rotating copies) and as
called. GPU times are medians of ``--rounds`` rounds in which ours and the baselines take
turns: one reading of a 1 ms attention forward moved by up to 12% between runs on the H100
(two runs of the same kernels), more than some of the gaps the report measures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from statistics import geometric_mean, median

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import triton_guide as tg  # noqa: E402
from triton_guide.precision import dot_input_precision, float32_matmul_precision  # noqa: E402
from triton_guide.benchmark import (  # noqa: E402
    calls_on, cold_matmul_inputs, copies_for_cold_cache, gb_per_s, gpu_ms, host_us,
    measure_ceiling, median_ms, queued_ms, tflop_per_s)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# rows x columns: 128-wide to 256k-wide rows, 4-256 MiB of fp32 each. Up to 32 MiB they fit
# in an H100's 50 MiB L2, and the smallest time the launcher as much as the kernel.
SOFTMAX_SHAPES = [(32768, 128), (16384, 256), (4096, 256), (4096, 512), (4096, 1024),
                  (4096, 2048), (4096, 4096), (4096, 8192), (4096, 16384), (2048, 32768),
                  (1024, 65536), (256, 262144)]
# M, N, K: square (powers of two and not), LLM projections for 4096 tokens of hidden 4096
# (QKV 3x, MLP up 4x and down, a 32000-word vocabulary), decode (few rows), ragged sizes.
MATMUL_SHAPES = (
    [(n, n, n) for n in (512, 1000, 1024, 2048, 3072, 4096, 6144, 8192)]
    + [(4096, 12288, 4096), (4096, 16384, 4096), (4096, 4096, 16384), (4096, 32000, 4096)]
    + [(m, 4096, 4096) for m in (1, 16, 64, 128)]
    + [(4095, 4097, 4093), (1023, 1025, 1027), (2000, 3000, 1000)]
)
# The same products with b stored column by column, as ``x @ w.t()`` in a linear layer (its
# weight is stored out x in) and every ``grad @ b.t()`` of a backward pass: the projections,
# a square, rows 2000 bytes long and few rows (the last two kept the pointer kernel until the
# twelfth session). Tallied on their own, so the mean over MATMUL_SHAPES stays comparable.
MATMUL_COLUMN_SHAPES = (
    [(4096, 4096, 4096), (4096, 12288, 4096), (4096, 16384, 4096), (4096, 4096, 16384),
     (4096, 32000, 4096), (1000, 1000, 1000), (128, 4096, 4096)]
)
ATTENTION_LENGTHS = [1024, 2048, 4096, 8192, 16384, 32768]
ATTENTION_TOKENS = 2**17 * 4  # batch x heads x length: B4 H32 at N=4096 fills an H100


class Tally:
    """The ratios of one op against one baseline, for the geometric mean and the worst."""

    def __init__(self):
        self.ratios: dict[tuple[str, str], list[tuple[float, str]]] = {}
        self.save_to: Path | None = None  # rewritten at every ratio (--save)
        self.ours: dict[tuple[str, str], float] = {}  # our own rate or time, per shape

    def add(self, op: str, baseline: str, ratio: float, what: str,
            ours: float | None = None) -> None:
        self.ratios.setdefault((op, baseline), []).append((ratio, what))
        if ours is not None:
            self.ours[(op, what)] = ours
        if self.save_to is not None:  # after each shape, so a run cut off keeps its part
            entries = [{"op": op, "baseline": baseline, "ratio": ratio, "what": what,
                        "ours": self.ours.get((op, what))}
                       for (op, baseline), ratios in self.ratios.items()
                       for ratio, what in ratios]
            self.save_to.write_text(json.dumps(entries, indent=1) + "\n")

    def load(self, path: Path) -> list[str]:
        """Add the ratios a run saved; a shape already tallied keeps its first ratio (parts
        that overlap would otherwise count it twice). Returns the shapes skipped."""
        skipped = []
        for entry in json.loads(path.read_text()):
            key = (entry["op"], entry["baseline"])
            if any(what == entry["what"] for _, what in self.ratios.get(key, [])):
                skipped.append(f"{entry['op']} vs {entry['baseline']} {entry['what']}")
                continue
            self.add(entry["op"], entry["baseline"], entry["ratio"], entry["what"])
        return skipped

    def print(self, runs: str = "same run") -> None:
        print(f"\ngeometric means (ours / baseline, {runs}):")
        for (op, baseline), ratios in self.ratios.items():
            mean = geometric_mean(r for r, _ in ratios)
            worst, where = min(ratios)
            print(f"  {op:<22} vs {baseline:<14} {mean:5.2f}x over {len(ratios):>2} shapes; "
                  f"worst {worst:.2f}x ({where})", flush=True)


TALLY = Tally()
ROUNDS = 3  # GPU-time rounds per shape (--rounds)


def in_turns(measures):
    """The median over ROUNDS rounds of each ``measures[name]()`` (a time in ms), the
    measures taking turns within a round so that a slow spell of the GPU hits all alike."""
    times = {name: [] for name in measures}
    for _ in range(ROUNDS):
        for name, measure in measures.items():
            times[name].append(measure())
    return {name: median(values) for name, values in times.items()}


def row(op, what, ours, baselines, unit, extra=""):
    cells = "  ".join(f"{name} {value:7.1f}" for name, value in baselines.items())
    ratios = "  ".join(f"{ours / value:5.2f}x {name}" for name, value in baselines.items())
    print(f"{op} {what:<34} ours {ours:7.1f} {unit:<7} | {cells} | {ratios}{extra}",
          flush=True)
    for name, value in baselines.items():
        TALLY.add(op, name, ours / value, what, ours=ours)


def ceilings():
    roofs = {kind: measure_ceiling(kind) for kind in ("copy", "gemm_bf16", "gemm_fp16")}
    print("ceilings: " + ", ".join(f"{r.label} {r.value:.0f} {r.unit}" for r in roofs.values()))
    return roofs


def vector_add(copy):
    n = 2**26
    x, y = torch.randn(2, n, device="cuda").unbind(0)
    nbytes = 3 * n * 4
    ours = gb_per_s(nbytes, median_ms(lambda: tg.vector_add(x, y)))
    row("vector_add", "fp32 n=2^26", ours,
        {"torch": gb_per_s(nbytes, median_ms(lambda: x + y)), "copy": copy}, "GB/s")


def as_called(op, what, ours_fn, base_name, base_fn, rate):
    """The ``as called`` cells of a row: do_bench of one call each, ours and the baseline."""
    ours, base = rate(median_ms(ours_fn)), rate(median_ms(base_fn))
    TALLY.add(f"{op} as called", base_name, ours / base, what, ours=ours)
    return f"  | as called {ours:7.1f} vs {base:7.1f} ({ours / base:4.2f}x)"


def softmax(shapes, dtypes, copy):
    for dtype_name in dtypes:
        for rows, cols in shapes:
            what = f"{dtype_name} {rows}x{cols}"
            first = torch.randn(rows, cols, device="cuda", dtype=DTYPES[dtype_name])
            nbytes = 2 * first.numel() * first.element_size()
            xs = [first] + [torch.randn_like(first)
                            for _ in range(copies_for_cold_cache(nbytes // 2) - 1)]
            # The same bytes copied, timed alike ("clone"): what a kernel that reads and
            # writes this tensor once can reach at this size (a 32 MiB copy does not reach
            # 1 GiB's rate). A clone allocates its output inside the graph as softmax does,
            # so both write into the graph's reused buffers. Against a copy into
            # preallocated outputs, softmaxes of rows up to 2048 wide came out at 1.07-1.30
            # of it (report at 12d3999), presumably from that reuse.
            ms = in_turns({
                "ours": lambda: gpu_ms([lambda x=x: tg.softmax(x) for x in xs]),
                "torch": lambda: gpu_ms([lambda x=x: torch.softmax(x, dim=-1) for x in xs]),
                "clone": lambda: gpu_ms([lambda x=x: x.clone() for x in xs])})
            ours, torch_rate, same_size = (gb_per_s(nbytes, ms[name])
                                           for name in ("ours", "torch", "clone"))
            called = as_called("softmax", what, lambda: tg.softmax(first), "torch",
                               lambda: torch.softmax(first, dim=-1),
                               lambda ms: gb_per_s(nbytes, ms))
            row("softmax", what, ours, {"torch": torch_rate}, "GB/s",
                f"  | {ours / copy:4.2f} of copy ({ours / same_size:4.2f} of this size's)"
                + called)
            if 4096 <= cols <= 32768:
                TALLY.add("softmax 4k-32k", "copy", ours / copy, what)
                TALLY.add("softmax 4k-32k", "same-size copy", ours / same_size, what)
            del xs, first
            torch.cuda.empty_cache()


def matmul(shapes, dtypes, b_by_columns=False):
    op = "matmul b by columns" if b_by_columns else "matmul"
    for dtype_name in dtypes:
        dtype = DTYPES[dtype_name]
        for m, n, k in shapes:
            what = f"{dtype_name} {m}x{n}x{k}"
            pairs = cold_matmul_inputs(m, n, k, dtype)
            if b_by_columns:
                pairs = [(a, b.t().contiguous().t()) for a, b in pairs]
            a, b = pairs[0]
            torch.cuda.synchronize()
            start = time.perf_counter()
            tg.matmul(a, b)  # the first call of a shape autotunes
            torch.cuda.synchronize()
            tune = time.perf_counter() - start
            flops = 2 * m * n * k
            ms = in_turns({"ours": lambda: gpu_ms(calls_on(tg.matmul, pairs)),
                           "cuBLAS": lambda: gpu_ms(calls_on(torch.matmul, pairs))})
            ours, cublas = tflop_per_s(flops, ms["ours"]), tflop_per_s(flops, ms["cuBLAS"])
            called = as_called(op, what, lambda: tg.matmul(a, b), "cuBLAS",
                               lambda: a @ b, lambda ms: tflop_per_s(flops, ms))
            row(op, what, ours, {"cuBLAS": cublas}, "TFLOP/s",
                f"  | tune {tune:5.1f} s" + called)
            del pairs, a, b
            torch.cuda.empty_cache()


# One large float32 product for the cost of each float32 matmul setting.
PRECISION_SHAPE = (4096, 4096, 4096)


def matmul_precision():
    """PRECISION_SHAPE in float32 under "highest" and "high": ours and cuBLAS's TFLOP/s (GPU
    time) and largest error against float64, |c - exact| / (|exact| + rms(exact)) (the
    element rule of triton_guide.testing), over the whole product."""
    m, n, k = PRECISION_SHAPE
    pairs = cold_matmul_inputs(m, n, k, torch.float32)
    a, b = pairs[0]
    exact = a.double() @ b.double()
    scale = exact.abs() + exact.pow(2).mean().sqrt()
    flops = 2 * m * n * k
    before = float32_matmul_precision()
    try:
        for setting in ("highest", "high"):
            torch.set_float32_matmul_precision(setting)
            tg.matmul(a, b)  # each setting compiles and autotunes its own kernel
            ms = in_turns({"ours": lambda: gpu_ms(calls_on(tg.matmul, pairs)),
                           "cuBLAS": lambda: gpu_ms(calls_on(torch.matmul, pairs))})
            cells = []
            for name, fn in (("ours", tg.matmul), ("cuBLAS", torch.matmul)):
                error = ((fn(a, b).double() - exact).abs() / scale).max().item()
                cells.append(f"{name} {tflop_per_s(flops, ms[name]):6.1f} TFLOP/s, "
                             f"max error {error:.1e}")
            print(f"matmul fp32 {m}x{n}x{k} {setting:<7} (tl.dot "
                  f"{dot_input_precision(torch.float32):<6}) " + " | ".join(cells), flush=True)
    finally:
        torch.set_float32_matmul_precision(before)
    del pairs, a, b, exact, scale
    torch.cuda.empty_cache()


def sdpa(backend, causal):
    def run(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def attention(lengths, head_dims, dtypes):
    backends = {"cuDNN": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
    for dtype_name in dtypes:
        for head_dim in head_dims:
            for seq in lengths:
                heads = 32 if head_dim == 64 else 16
                batch = max(1, ATTENTION_TOKENS // (heads * seq))
                shape = (batch, heads, seq, head_dim)
                for causal in (False, True):
                    q, k, v = (torch.randn(shape, device="cuda", dtype=DTYPES[dtype_name],
                                           requires_grad=True) for _ in range(3))
                    flops = 4 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1)
                    fns = {"ours": lambda q, k, v, c=causal: tg.attention(q, k, v, causal=c)}
                    fns |= {name: sdpa(b, causal) for name, b in backends.items()}
                    tag = (f"{dtype_name} B{batch} H{heads} N{seq} d{head_dim} "
                           f"{'causal' if causal else 'full'}")
                    # Rotating copies of the inputs: each call finds its own out of L2.
                    inputs = [(q, k, v)] + [
                        tuple(torch.randn_like(q, requires_grad=True) for _ in range(3))
                        for _ in range(copies_for_cold_cache(3 * q.numel() * q.itemsize) - 1)]
                    # Forward GPU time on the copies without gradients (a CUDA graph).
                    detached = [tuple(t.detach() for t in x) for x in inputs]
                    forward = in_turns({name: lambda f=f: gpu_ms([lambda x=x: f(*x)
                                                                  for x in detached])
                                        for name, f in fns.items()})
                    forward = {name: tflop_per_s(flops, ms) for name, ms in forward.items()}
                    called = as_called("attention fwd", tag, lambda: fns["ours"](q, k, v),
                                       "cuDNN", lambda: fns["cuDNN"](q, k, v),
                                       lambda ms: tflop_per_s(flops, ms))
                    grad = torch.randn(shape, device="cuda", dtype=DTYPES[dtype_name])
                    calls = {name: [lambda o=f(*x), x=x: torch.autograd.grad(
                                        o, x, grad, retain_graph=True) for x in inputs]
                             for name, f in fns.items()}
                    unclean = set()

                    def backward_ms(name):
                        # Three of queued_ms's own rounds per turn (not its default five; an
                        # odd number, so that its median is one round, not the slower of
                        # two): nine in all per backend instead of fifteen. With fifteen
                        # the fp16 half of the report ran past 320 s before its last two
                        # shapes; this is meant to fit one dtype in a ten-minute call (not
                        # yet timed).
                        ms, covered = queued_ms(calls[name], rounds=3)
                        if not covered:  # some rounds had the GPU wait for the host
                            unclean.add(name)
                        return ms
                    backward = in_turns({name: lambda name=name: backward_ms(name)
                                         for name in fns})
                    backward = {name: tflop_per_s(2.5 * flops, ms)
                                for name, ms in backward.items()}
                    first = {name: c[0] for name, c in calls.items()}
                    del calls
                    called_bwd = as_called("attention bwd", tag, first["ours"], "cuDNN",
                                           first["cuDNN"],
                                           lambda ms: tflop_per_s(2.5 * flops, ms))
                    if unclean:
                        called_bwd += (f"  | GPU time from too few clean rounds: "
                                       f"{sorted(unclean)}")
                    ours_fwd, ours_bwd = forward.pop("ours"), backward.pop("ours")
                    row("attention fwd", tag, ours_fwd, forward, "TFLOP/s", called)
                    row("attention bwd", tag, ours_bwd, backward, "TFLOP/s", called_bwd)
                    del q, k, v, grad, inputs, detached, first
                torch.cuda.empty_cache()


# Decode: queries of batch x 32 heads on 4 key/value heads (GQA 8:1), head_dim 128, against
# a KV cache of each length; no mask (one query sees every key either way, and SDPA's
# is_causal is aligned top-left). The rate is the keys' and values' bytes per second.
DECODE_BATCHES, DECODE_QUERIES = (1, 8, 64), (1, 4, 16)
DECODE_KEYS = (4096, 32768, 131072)


def sdpa_gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def decode(dtypes, quick=False):
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}
    heads, kv_heads, head_dim = 32, 4, 128
    for dtype_name in dtypes:
        for batch in DECODE_BATCHES[::2] if quick else DECODE_BATCHES:
            for num_keys in DECODE_KEYS[::2] if quick else DECODE_KEYS:
                kv_bytes = 2 * batch * kv_heads * num_keys * head_dim * 2
                if 2 * kv_bytes > torch.cuda.mem_get_info()[0]:
                    print(f"decode {dtype_name} B{batch} Nk{num_keys}: skipped (memory)")
                    continue
                # Rotating copies up to 256 MiB, so that each call reads its cache from HBM.
                copies = copies_for_cold_cache(kv_bytes, at_least=1)
                caches = [tuple(torch.randn(batch, kv_heads, num_keys, head_dim, device="cuda",
                                            dtype=DTYPES[dtype_name]) for _ in range(2))
                          for _ in range(copies)]
                for num_queries in DECODE_QUERIES[::2] if quick else DECODE_QUERIES:
                    q = torch.randn(batch, heads, num_queries, head_dim, device="cuda",
                                    dtype=DTYPES[dtype_name])
                    # The backend is chosen once around each measurement, not per call.
                    fns = {"ours": (tg.attention, contextlib.nullcontext)}
                    fns |= {n: (sdpa_gqa, lambda b=b: sdpa_kernel(b)) for n, b in backends.items()}
                    refused = []
                    for name, (f, context) in list(fns.items()):
                        try:
                            with context():
                                f(q, *caches[0])
                        except RuntimeError:  # this backend does not take the shape
                            refused.append(name)
                            del fns[name]

                    def measure(f, context):
                        with context():
                            return gpu_ms([lambda c=c: f(q, *c) for c in caches])

                    def called_vs(name, f, context):
                        with context():
                            return as_called("decode", what,
                                             lambda: tg.attention(q, *caches[0]), name,
                                             lambda: f(q, *caches[0]),
                                             lambda ms: gb_per_s(kv_bytes, ms))

                    what = f"{dtype_name} B{batch} Nq{num_queries} Nk{num_keys}"
                    ms = in_turns({name: lambda f=f, c=c: measure(f, c)
                                   for name, (f, c) in fns.items()})
                    rates = {name: gb_per_s(kv_bytes, value) for name, value in ms.items()}
                    called = "".join(called_vs(name, f, c) for name, (f, c) in fns.items()
                                     if name != "ours")
                    if refused:
                        called += f"  | refused by {', '.join(refused)}"
                    row("decode", what, rates.pop("ours"), rates, "GB/s", called)
                del caches
                torch.cuda.empty_cache()


def host_cases():
    """Every op at a small size, where the kernel takes a few microseconds and a call costs
    what the host spends on it: (ours, torch's equivalent), without autograd recording, then
    with it (the forward alone, and forward and backward)."""
    dev, half = "cuda", torch.float16
    v = torch.randn(4096, device=dev)
    s = torch.randn(4096, 256, device=dev, dtype=half)
    a = torch.randn(512, 512, device=dev, dtype=half)
    q = torch.randn(1, 4, 256, 64, device=dev, dtype=half)
    logits = torch.randn(256, 1024, device=dev)
    target = torch.randint(0, 1024, (256,), device=dev)
    x = torch.randn(256, 1024, device=dev, dtype=half)
    w, b = torch.randn(2, 1024, device=dev, dtype=half).unbind(0)
    sg, qg, lg, xg, ag = (t.clone().requires_grad_() for t in (s, q, logits, x, a))
    gs = torch.randn_like(s)
    return {
        "vector_add 4096": (lambda: tg.vector_add(v, v), lambda: v + v),
        "softmax 4096x256": (lambda: tg.softmax(s), lambda: torch.softmax(s, -1)),
        "matmul 512^3": (lambda: tg.matmul(a, a), lambda: a @ a),
        "attention 1x4x256x64": (lambda: tg.attention(q, q, q),
                                 lambda: F.scaled_dot_product_attention(q, q, q)),
        "cross_entropy 256x1024": (lambda: tg.cross_entropy(logits, target),
                                   lambda: F.cross_entropy(logits, target)),
        "layer_norm 256x1024": (lambda: tg.layer_norm(x, w, b),
                                lambda: F.layer_norm(x, (1024,), w, b)),
        "rms_norm 256x1024": (lambda: tg.rms_norm(x, w), lambda: F.rms_norm(x, (1024,), w)),
        "softmax, recorded": (lambda: tg.softmax(sg), lambda: torch.softmax(sg, -1)),
        "matmul, recorded": (lambda: tg.matmul(ag, a), lambda: ag @ a),
        "softmax fwd+bwd": (lambda: tg.softmax(sg).backward(gs),
                            lambda: torch.softmax(sg, -1).backward(gs)),
        "matmul fwd+bwd": (lambda: tg.matmul(ag, a).sum().backward(),
                           lambda: (ag @ a).sum().backward()),
        "attention fwd+bwd": (lambda: tg.attention(qg, qg, qg).sum().backward(),
                              lambda: F.scaled_dot_product_attention(qg, qg, qg).sum().backward()),
        "cross_entropy fwd+bwd": (lambda: tg.cross_entropy(lg, target).backward(),
                                  lambda: F.cross_entropy(lg, target).backward()),
        "layer_norm fwd+bwd": (lambda: tg.layer_norm(xg, w, b).sum().backward(),
                               lambda: F.layer_norm(xg, (1024,), w, b).sum().backward()),
        "rms_norm fwd+bwd": (lambda: tg.rms_norm(xg, w).sum().backward(),
                             lambda: F.rms_norm(xg, (1024,), w).sum().backward()),
    }


def host():
    """Host time per call (``host_us``: many calls back to back, one sync at the end) of
    each :func:`host_cases` pair, ours and torch's taking turns."""
    print("\nhost time per call, us (calls back to back, one sync at the end):")
    for what, (ours_fn, torch_fn) in host_cases().items():
        times = in_turns({"ours": lambda: host_us(ours_fn, repeats=1),
                          "torch": lambda: host_us(torch_fn, repeats=1)})
        ours, base = times["ours"], times["torch"]
        print(f"host {what:<24} ours {ours:7.1f} us | torch {base:7.1f} | "
              f"{ours / base:5.2f}x torch", flush=True)
        TALLY.add("host time", "torch", ours / base, what, ours=ours)


def spread_over_processes(count: int, argv: list[str]) -> None:
    """Run this report ``count`` times, each in a fresh process, and print per shape how far
    our own numbers moved between them: max / min of the processes' medians."""
    import subprocess
    import tempfile

    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(count):
            saved = Path(folder) / f"run{index}.json"
            print(f"process {index + 1} of {count} ...", flush=True)
            subprocess.run([sys.executable, __file__, *argv, "--save", str(saved)],
                           check=True, stdout=subprocess.DEVNULL)
            runs.append({(e["op"], e["what"]): e["ours"] for e in json.loads(saved.read_text())
                         if e.get("ours")})
    print(f"\nour numbers over {count} fresh processes (max / min of each process's median):")
    worst = []
    for key in runs[0]:
        values = [run[key] for run in runs if key in run]
        spread = max(values) / min(values)
        worst.append((spread, key))
        flag = "  > 1.10" if spread > 1.10 else ""
        print(f"  {key[0]:<22} {key[1]:<34} {spread:5.3f}{flag}", flush=True)
    spread, key = max(worst)
    print(f"largest spread {spread:.3f} ({key[0]} {key[1]}); "
          f"{sum(s > 1.10 for s, _ in worst)} of {len(worst)} above 1.10")


def main():
    global ROUNDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few shapes of each op")
    parser.add_argument("--only", nargs="*", default=None,
                        help="ops to run: add softmax matmul precision attention decode host "
                             "(default: all)")
    parser.add_argument("--dtypes", nargs="*", choices=list(DTYPES), default=None,
                        help="of each op's dtypes, only these (default: all)")
    parser.add_argument("--lengths", nargs="*", type=int, choices=ATTENTION_LENGTHS,
                        default=None, help="of attention's sequence lengths, only these")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"GPU-time rounds per shape, medians (default {ROUNDS})")
    parser.add_argument("--save", type=Path, default=None,
                        help="also write every ratio to this JSON file, for --merge")
    parser.add_argument("--processes", type=int, default=None, metavar="N",
                        help="run the report in N fresh processes and print how far our "
                             "numbers moved between them (the autotuner's picks included)")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="FILE",
                        help="print the geometric means over the ratios that earlier runs "
                             "saved (--save) and stop; needs no GPU")
    args = parser.parse_args()
    if args.merge:
        for path in args.merge:
            skipped = TALLY.load(path)
            if skipped:
                print(f"{path}: {len(skipped)} ratio{'s' * (len(skipped) != 1)} of shapes "
                      f"an earlier file has, left out (first: {skipped[0]})")
        TALLY.print(f"each ratio from one run; {len(args.merge)} runs merged")
        return
    if args.processes is not None:
        if args.processes < 2:
            parser.error("--processes needs at least 2")
        argv = sys.argv[1:]
        at = argv.index("--processes")
        del argv[at:at + 2]
        spread_over_processes(args.processes, argv)
        return
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, not {args.rounds}")
    ROUNDS = args.rounds
    TALLY.save_to = args.save

    def dtypes(*names):
        return [name for name in names if args.dtypes is None or name in args.dtypes]

    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/report.py needs a CUDA GPU")
    print(tg.runtime.describe(), flush=True)
    only = set(args.only or ["add", "softmax", "matmul", "precision", "attention", "decode",
                             "host"])
    if "host" in only:
        host()
    roofs = ceilings()
    if "add" in only:
        vector_add(roofs["copy"].value)
    if "softmax" in only:
        shapes = SOFTMAX_SHAPES[::4] if args.quick else SOFTMAX_SHAPES
        softmax(shapes, dtypes("fp32", "fp16", "bf16"), roofs["copy"].value)
    if "matmul" in only:
        shapes = MATMUL_SHAPES[::5] if args.quick else MATMUL_SHAPES
        matmul(shapes, dtypes("fp16", "bf16"))
        shapes = MATMUL_COLUMN_SHAPES[::3] if args.quick else MATMUL_COLUMN_SHAPES
        matmul(shapes, dtypes("fp16", "bf16"), b_by_columns=True)
    if "precision" in only:
        matmul_precision()
    if "attention" in only:
        lengths = [1024, 16384] if args.quick else ATTENTION_LENGTHS
        lengths = [n for n in lengths if args.lengths is None or n in args.lengths]
        attention(lengths, [64, 128], dtypes("fp16", "bf16"))
    if "decode" in only:
        decode(dtypes("fp16", "bf16"), quick=args.quick)
    TALLY.print()


if __name__ == "__main__":
    main()
