"""Run one example page on a GPU with every ``median_ms`` (do_bench) sample it takes printed
to standard error, beside the host time per call measured right after it (50 calls).

    python lab/page_samples.py examples/core_kernels/02_softmax.py [--nogc]

``--nogc`` runs the page with Python's garbage collector off. Written to see why the
smallest sizes of host-timed sweeps changed from one recording to the next (NOTES.md,
eighteenth session).
"""
import argparse
import gc
import os
import runpy
import sys
import time

import torch

import triton_guide.benchmark as benchmark

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("page")
parser.add_argument("--nogc", action="store_true")
args = parser.parse_args()
if args.nogc:
    gc.disable()
timed = benchmark.median_ms
count = 0


def sampled(fn):
    global count
    ms = timed(fn)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(50):
        fn()
    host = (time.perf_counter() - start) / 50 * 1e6
    torch.cuda.synchronize()
    count += 1
    print(f"SAMPLE {count:3d} do_bench {ms * 1e3:8.1f} us  host {host:6.1f} us  "
          f"gc {gc.get_count()}", file=sys.stderr, flush=True)
    return ms


benchmark.recording.median_ms = sampled  # sweeps (Benchmark) look it up there when they time
page = os.path.abspath(args.page)
os.chdir(os.path.dirname(page))
sys.argv = [page]
runpy.run_path(page, run_name="__main__")
