"""Refresh the results store on this GPU: run every example page (or some) with recording on.

    python benchmarks/record.py [--page KEY_OR_PATH ...] [--list]

``make bench`` and ``make bench PAGE=softmax`` call this. Each page runs as its own process,
as a plain script, with ``TRITON_GUIDE_RECORD=1`` (its ``Benchmark`` then writes
``triton_guide/_results/<gpu>/<page>.json``) and a non-interactive matplotlib backend; its output is shown
as it runs. No site is built. Needs a CUDA GPU: interpreter timings are never recorded.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triton_guide.results import RECORD_ENV, page_key  # noqa: E402


def pages() -> list[Path]:
    """The numbered example pages, in gallery order (section folders, then number)."""
    found = sorted(ROOT.glob("examples/*/[0-9][0-9]_*.py"))
    keys: dict[str, Path] = {}
    for page in found:
        if page_key(page) in keys:
            raise SystemExit(f"{page} and {keys[page_key(page)]} would record into the same "
                             f"results file ({page_key(page)}.json): rename one of them")
        keys[page_key(page)] = page
    return found


def select(all_pages: list[Path], wanted: list[str]) -> list[Path]:
    """Pages matching any of ``wanted``: a page key (``softmax``), file name or path."""
    chosen = []
    for want in wanted:
        stem = Path(want).stem
        matches = [p for p in all_pages if stem in (page_key(p), p.stem)]
        if not matches:
            known = ", ".join(page_key(p) for p in all_pages)
            raise SystemExit(f"--page {want!r} matches no page; pages: {known}")
        chosen += [p for p in matches if p not in chosen]
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", nargs="*", default=[],
                        help="page keys or paths (default: every page)")
    parser.add_argument("--list", action="store_true", help="list the pages and stop")
    args = parser.parse_args()
    chosen = select(pages(), args.page) if args.page else pages()
    if args.list:
        for page in chosen:
            print(f"{page_key(page):<20} {page.relative_to(ROOT)}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print("benchmarks/record.py needs a CUDA GPU: without one, kernels run in the Triton "
              "interpreter, whose timings are never recorded.", file=sys.stderr)
        return 2
    env = dict(os.environ, **{RECORD_ENV: "1", "MPLBACKEND": "Agg"})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("TRITON_GUIDE_TIMINGS", None)
    failed, started = [], time.perf_counter()
    for number, page in enumerate(chosen, 1):
        name = page.relative_to(ROOT)
        print(f"\n[{number}/{len(chosen)}] {name}", flush=True)
        began = time.perf_counter()
        code = subprocess.run([sys.executable, str(page)], cwd=page.parent, env=env).returncode
        took = time.perf_counter() - began
        print(f"[{number}/{len(chosen)}] {name}: "
              f"{'done' if code == 0 else f'FAILED (exit {code})'} in {took:.0f} s", flush=True)
        if code != 0:
            failed.append(str(name))
    print(f"\n{len(chosen) - len(failed)} of {len(chosen)} pages ran in "
          f"{time.perf_counter() - started:.0f} s; results are in "
          "triton_guide/_results/ (git status triton_guide/_results/)")
    if failed:
        print("failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
