"""One test module run natively in a child process, for the GPU check scripts
(``gpu_check_*.py``): its summary line printed, and what a results file keeps of it."""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_test_module(path: str) -> dict:
    """``pytest path`` (relative to the repository) in a child process with this checkout
    first on its path: ``{"returncode", "summary", "tail"}`` (the tail of its output only
    where it failed, which is also printed)."""
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider",
                           "-rs"], cwd=ROOT, env={**os.environ, "PYTHONPATH": python_path},
                          capture_output=True, text=True, timeout=300)
    lines = done.stdout.strip().splitlines()
    print(f"pytest {path}: {lines[-1] if lines else '(no output)'} "
          f"({time.perf_counter() - start:.0f} s)")
    if done.returncode != 0:
        print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")
    return {"returncode": done.returncode, "summary": lines[-1] if lines else "",
            "tail": done.stdout[-6000:] if done.returncode else ""}
