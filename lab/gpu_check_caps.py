"""How long block sizes take to compile natively, up to the cap the launchers enforce.

    python lab/gpu_check_caps.py results.json      (CUDA GPU, about 2 minutes)

``triton_guide.validation`` caps every block size at ``MAX_ELEMENTS_PER_THREAD`` elements per
thread (block / (32 * num_warps); ``MAX_ELEMENTS_PER_THREAD_EXP`` for the online softmax and
cross-entropy). This compiles ``vector_add_kernel`` (float32, 4 warps) at
block sizes 2**10 up to that cap, and one size past it, bypassing the check, to show what
the cap refuses; then each other launcher at its own largest accepted block. Every compile
runs in a subprocess of its own with a fresh ``TRITON_CACHE_DIR`` (nothing reused) and a
timeout. Printed and written as JSON: seconds to the first result (compile and launch),
registers and spilled bytes per thread, and whether the result matched torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 40  # per compile; one past the cap took about 5 s on a CPU host

# Run in the subprocess: call one launcher once (compiling it), time that, and read the
# compiled kernel's registers and spills.
CHILD = r"""
import json, sys, time
import torch
import triton_guide
from triton_guide import validation
from triton_guide.copy import copy, copy_kernel
from triton_guide.cross_entropy import cross_entropy, cross_entropy_forward_kernel
from triton_guide.reduction import vector_sum, partial_sums_kernel
from triton_guide.softmax import softmax, softmax_online_kernel
from triton_guide.transpose import transpose, transpose_kernel
from triton_guide.vector_add import vector_add, vector_add_kernel

case, block, bypass = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if bypass:  # past the cap: let the launcher through to measure what the cap refuses
    validation.check_elements_per_thread = lambda *args, **kwargs: None
x = torch.randn(100_003, device="cuda")
rows = torch.randn(64, 1001, device="cuda")
# as many classes as the block, so cross_entropy launches the block it is given
logits = torch.randn(16, block + 3, device="cuda")
target = torch.randint(0, block + 3, (16,), device="cuda")
calls = {
    "vector_add": (lambda: vector_add(x, x, block_size=block), lambda: x + x, vector_add_kernel),
    "copy_1_warp": (lambda: copy(x, block_size=block, num_warps=1), lambda: x, copy_kernel),
    "vector_sum": (lambda: vector_sum(x, block_size=block), lambda: x.double().sum(),
                   partial_sums_kernel),
    "softmax_online": (lambda: softmax(rows, method="online", block_size=block),
                       lambda: torch.softmax(rows.double(), -1), softmax_online_kernel),
    "cross_entropy": (lambda: cross_entropy(logits, target, block_size=block),
                      lambda: torch.nn.functional.cross_entropy(logits.double(), target),
                      cross_entropy_forward_kernel),
    "transpose_tile": (lambda: transpose(rows, block_rows=128, block_cols=block // 128),
                       lambda: rows.t(), transpose_kernel),
}
call, reference, kernel = calls[case]
torch.cuda.synchronize()
start = time.perf_counter()
out = call()
torch.cuda.synchronize()
seconds = time.perf_counter() - start
error = ((out.double() - reference().double()).norm() / reference().double().norm()).item()
registers = spills = None
for cache in getattr(kernel, "device_caches", {}).values():
    for compiled in cache[0].values():
        compiled._init_handles()
        # Triton reports local memory per thread in 4-byte words
        registers, spills = compiled.n_regs, 4 * compiled.n_spills
print(json.dumps(dict(seconds=seconds, registers=registers, spilled_bytes=spills,
                      relative_error=error)))
"""


def measure(case: str, block: int, warps: int, bypass: bool = False) -> dict:
    row = dict(case=case, block=block, num_warps=warps,
               per_thread=block // (32 * warps), past_cap=bypass)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        start = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", CHILD, case, str(block),
                                   "1" if bypass else "0"],
                                  capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        except subprocess.TimeoutExpired:
            row.update(status=f"still compiling after {TIMEOUT_S} s")
            return row
        row["process_s"] = round(time.perf_counter() - start, 2)
        if done.returncode:
            row.update(status="failed", error=done.stderr.strip().splitlines()[-1:])
            return row
        row.update(json.loads(done.stdout.strip().splitlines()[-1]), status="ok")
        row["matches_torch"] = row["relative_error"] < 1e-4  # float32 sums of 1e5 values
    return row


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.path.insert(0, str(ROOT))
    import torch

    from triton_guide.validation import (
        MAX_ELEMENTS_PER_THREAD,
        MAX_ELEMENTS_PER_THREAD_EXP,
        max_block_size,
    )

    cap = max_block_size(4)
    print(f"{torch.cuda.get_device_name()}; caps: {MAX_ELEMENTS_PER_THREAD} elements per thread, "
          f"{MAX_ELEMENTS_PER_THREAD_EXP} for the online softmax and cross-entropy")
    plan = [("vector_add", 2**p, 4) for p in range(10, cap.bit_length())]
    plan.append(("vector_add", 2 * cap, 4, True))  # what the cap refuses
    # every other launcher at its own largest accepted block (its warps for that block)
    plan += [("copy_1_warp", max_block_size(1), 1), ("vector_sum", max_block_size(4), 4),
             ("softmax_online", max_block_size(32, MAX_ELEMENTS_PER_THREAD_EXP), 32),
             ("cross_entropy", max_block_size(8, MAX_ELEMENTS_PER_THREAD_EXP), 8),
             ("transpose_tile", max_block_size(4), 4)]
    header = (f"{'launcher':<16}{'block':>9}{'warps':>6}{'per thread':>11}{'compile+run s':>15}"
              f"{'registers':>10}{'spilled B':>10}  result")
    print(header)
    rows = []
    for case, block, warps, *bypass in plan:
        row = measure(case, block, warps, *bypass)
        rows.append(row)
        result = row["status"] if row["status"] != "ok" else (
            "matches torch" if row["matches_torch"] else f"error {row['relative_error']:.1e}")
        seconds = f"{row['seconds']:.2f}" if "seconds" in row else "-"
        past = " (past the cap)" if row["past_cap"] else ""
        print(f"{case:<16}{block:>9}{warps:>6}{row['per_thread']:>11}{seconds:>15}"
              f"{row.get('registers') or '-':>10}{row.get('spilled_bytes') or 0:>10}  "
              f"{result}{past}", flush=True)
    Path(sys.argv[1]).write_text(json.dumps(dict(
        device=torch.cuda.get_device_name(), torch=torch.__version__,
        triton=__import__("triton").__version__, cap_per_thread=MAX_ELEMENTS_PER_THREAD,
        cap_per_thread_exp=MAX_ELEMENTS_PER_THREAD_EXP,
        rows=rows), indent=1))


if __name__ == "__main__":
    main()
