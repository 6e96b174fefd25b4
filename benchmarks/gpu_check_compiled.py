"""Compare what triton_guide.compiled reads from kernels compiled for sm_90 without a GPU
with what the GPU's own compiled kernels say (``n_regs``, ``n_spills``,
``metadata.shared``), for every kernel of the "What the compiler made" page; and report
which configuration the autotuners pick here for the page's autotuned kernels.

Runs the page (examples/hopper/03_what_the_compiler_made.py), which records the launches
and compiles them in a separate process, then compiles each launch on the GPU through
Triton's JIT. Needs a CUDA GPU. About a minute on an H100 (the autotuning is most of it).

    python benchmarks/gpu_check_compiled.py results.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "examples" / "hopper" / "03_what_the_compiler_made.py"


def compare(name, launch, ours, compiled) -> dict:
    gpu = compiled.gpu_compiled(launch)
    mine = {"registers": ours.registers, "spills": ours.spills, "shared": ours.shared}
    return {"name": name, "kernel": launch.name, "ours": mine,
            "local_bytes": ours.local_bytes,
            "gpu": {k: gpu[k] for k in ("registers", "spills", "shared")},
            "same": mine == {k: gpu[k] for k in ("registers", "spills", "shared")}}


def autotuned_picks(page: dict) -> dict:
    """Run the page's autotuned ops for real once and read each autotuner's choice."""
    import importlib

    import triton_guide as tg

    # (triton_guide.matmul and .attention are the ops; their modules hold the kernels)
    matmul = importlib.import_module("triton_guide.matmul")
    attention = importlib.import_module("triton_guide.attention")

    torch.manual_seed(0)
    a = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
    tg.matmul(a, a)
    q = torch.randn(4, 16, 4096, 128, dtype=torch.float16, device="cuda", requires_grad=True)
    out = tg.attention(q, q, q, causal=True)
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    picks = {}
    for label, kernel in [("matmul", matmul.matmul_tma_kernel),
                          ("attention", attention.attention_forward_kernel),
                          ("attention backward: dk, dv", attention.attention_backward_dkdv_kernel),
                          ("attention backward: dq", attention.attention_backward_dq_kernel)]:
        best = getattr(kernel, "best_config", None)
        picks[label] = None if best is None else {**best.kwargs, "num_warps": best.num_warps,
                                                  "num_stages": best.num_stages}
    return picks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="where to write the results as JSON")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    sys.path.insert(0, str(ROOT))
    page_output = io.StringIO()
    with contextlib.redirect_stdout(page_output):
        page = runpy.run_path(str(PAGE), run_name="__main__")
    print(page_output.getvalue())
    from triton_guide import compiled

    rows = [compare(name, launch, page["results"][name], compiled)
            for name, launch in page["launches"].items()]
    for warps, (launch, ours) in zip(page["variants"], zip(
            page["variants"].values(), compiled.compile_for(list(page["variants"].values())))):
        rows.append(compare(f"attention on {warps} warps", launch, ours, compiled))
    print(f"\n{torch.cuda.get_device_name()}, triton {triton.__version__}, "
          f"torch {torch.__version__}")
    print(f"{'kernel':<28}{'regs cpu/gpu':>14}{'spills cpu/gpu':>16}{'shared cpu/gpu':>18}  same")
    for row in rows:
        o, g = row["ours"], row["gpu"]
        print(f"{row['name']:<28}{o['registers']:>7}/{g['registers']:<6}{o['spills']:>8}/"
              f"{g['spills']:<7}{o['shared']:>9}/{g['shared']:<8}  {row['same']}")
    picks = autotuned_picks(page)
    print("\nautotuners' picks here (the page compiles stated configurations):")
    for label, pick in picks.items():
        print(f"  {label}: {pick}")
    Path(options.output).write_text(json.dumps({
        "device": torch.cuda.get_device_name(), "triton": triton.__version__,
        "torch": torch.__version__, "rows": rows, "autotuned": picks,
        "page_output": page_output.getvalue()}, indent=1))
    print(f"\nall the same: {all(row['same'] for row in rows)}; written to {options.output}")
    return 0 if all(row["same"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
