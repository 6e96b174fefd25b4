"""The results store: GPU timings recorded by the example pages, kept as data in the repo.

Layout: ``_results/<gpu-slug>/<page-key>.json`` inside the package (``triton_guide/_results``
in the repository), one file per GPU and page, so that an installed package draws the same
timings as a clone; ``TRITON_GUIDE_RESULTS`` points elsewhere, as the tests do. The page key
is the page's file name without its number: ``examples/basics/01_vector_add.py`` records
into ``vector_add.json``, so renumbering a page keeps its results.

A file holds one run of one page on one GPU: the GPU (name, compute capability, driver,
CUDA), the triton, torch and Python versions, the date, the project's git commit and
whether the working tree had other changes, a hash of the kernel source that was measured,
and every benchmark of the page: x values, one series per variant with its unit, and the
ceiling measured in the same run.

**Kernel source of a page**, defined once here: the modules of ``triton_guide`` that the
page imports, plus the package modules those import in turn, leaving out the shared
machinery (:data:`MACHINERY`), which does not change what a kernel computes. The hash
covers their text; when it differs from the recorded one, the recording predates a kernel
change. The machinery can still move timings without the hash flagging it: its host-side
code (argument checks in ``validation``, the op registrations in ``library``, the cached
launch in ``launch``) where the host bounds a call, at the smallest sizes, and ``validation``'s choice between 32- and 64-bit
offsets, which picks the kernel's ``INT64_OFFSETS`` variant.

Writing happens only from a live GPU run (see :class:`triton_guide.benchmark.Benchmark`);
this module never times anything.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

from .page_imports import PackageImports

SCHEMA = 1
PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
RESULTS_DIR = PACKAGE_DIR / "_results"  # shipped in the wheel (pyproject.toml's package-data)
RESULTS_ENV = "TRITON_GUIDE_RESULTS"
RECORD_ENV = "TRITON_GUIDE_RECORD"
TIMINGS_ENV = "TRITON_GUIDE_TIMINGS"
COMMIT_ENV = "TRITON_GUIDE_COMMIT"
# Shared machinery: editing these does not change what a page's kernels compute or how fast.
MACHINERY = frozenset({"__init__", "runtime", "validation", "testing", "benchmark", "results",
                       "library", "launch", "registry"})
STALE = "recorded before the kernel changed: these numbers may be stale"


def results_dir() -> Path:
    """Where results live: ``$TRITON_GUIDE_RESULTS``, else the package's ``_results/``."""
    return Path(os.environ.get(RESULTS_ENV) or RESULTS_DIR)


def recording_requested() -> bool:
    """Whether ``TRITON_GUIDE_RECORD`` asks this run to write its timings to the store."""
    return os.environ.get(RECORD_ENV, "0") not in ("", "0")


def page_key(page: str | os.PathLike) -> str:
    """``examples/core_kernels/02_softmax.py`` -> ``softmax``."""
    return re.sub(r"^\d+_", "", Path(page).stem)


def gpu_slug(name: str) -> str:
    """A folder name for a GPU: ``NVIDIA H100 80GB HBM3`` -> ``h100-80gb-hbm3``."""
    name = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def short_gpu_name(name: str) -> str:
    return re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)


# -- kernel source -------------------------------------------------------------------------


def kernel_modules(page_source: str, package_dir: Path = PACKAGE_DIR) -> list[str]:
    """The package modules whose source counts as the page's kernel source (module
    docstring), as paths relative to the package's parent, e.g. ``triton_guide/softmax.py``:
    what :mod:`triton_guide.page_imports` finds the page using, less :data:`MACHINERY`.
    """
    files = PackageImports(package_dir).used_by(page_source, exclude=MACHINERY)
    return [str(path.relative_to(Path(package_dir).resolve().parent)) for path in files]


def kernel_source(page_source: str, package_dir: Path = PACKAGE_DIR) -> dict:
    """``{"modules": {path: sha256}, "sha256": hash of them all, "code_sha256": ...}`` for a
    page's kernels; ``code_sha256`` is :func:`code_fingerprint` of the same modules."""
    root = package_dir.parent
    modules, sources = {}, []
    combined = hashlib.sha256()
    for relative in kernel_modules(page_source, package_dir):
        data = (root / relative).read_bytes()
        modules[relative] = hashlib.sha256(data).hexdigest()
        combined.update(relative.encode() + b"\0" + data + b"\0")
        sources.append(data.decode())
    return {"modules": modules, "sha256": combined.hexdigest(),
            "code_sha256": code_fingerprint(sources)}


def code_fingerprint(sources: list[str]) -> str:
    """A hash of what the modules' code does, blind to how it is written down: each
    top-level statement but the imports, parsed (so comments drop out), its docstrings
    removed, the statements sorted. Rewording a comment, or moving a function from one of
    the modules to another, keeps it; changing any statement does not. The same on every
    Python version (:func:`_canonical`), as recordings are made on one and read on others."""
    statements = []
    for source in sources:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef)) and body and isinstance(body[0], ast.Expr)
                    and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        statements += [_canonical(node) for node in tree.body
                       if not isinstance(node, (ast.Import, ast.ImportFrom))]
    return hashlib.sha256("\n".join(sorted(statements)).encode()).hexdigest()


def _canonical(node) -> str:
    """``ast.dump`` without the fields that are empty (None, []): newer Pythons add such
    fields (``type_params``) and differ in whether ``ast.dump`` shows them."""
    if isinstance(node, ast.AST):
        fields = ((name, _canonical(getattr(node, name, None))) for name in node._fields)
        return f"{type(node).__name__}({', '.join(f'{n}={v}' for n, v in fields if v)})"
    if isinstance(node, list):
        return f"[{', '.join(_canonical(item) for item in node)}]" if node else ""
    return "" if node is None else repr(node)


def stale_reason(recorded: dict, current: dict) -> str | None:
    """``None`` when the recorded kernel source is the current one (the same files, or the
    same code by :func:`code_fingerprint`), else what changed."""
    if recorded.get("sha256") == current["sha256"]:
        return None
    if recorded.get("code_sha256") and recorded.get("code_sha256") == current.get("code_sha256"):
        return None
    old, new = recorded.get("modules", {}), current["modules"]
    changed = sorted(m for m in set(old) | set(new) if old.get(m) != new.get(m))
    return f"{STALE} ({', '.join(changed) or 'kernel source'} changed since)"


# -- where and with what a run happened -----------------------------------------------------


def git_state(root: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """The commit checked out at ``root`` and whether files other than the results differ.

    ``TRITON_GUIDE_COMMIT`` names the commit instead, for a machine that received a copy of
    a checkout without its history (its own ``git`` would name another commit). Whether that
    copy had local changes cannot be checked there, so the second value is then ``None``.
    """
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV], None
    if not (root / ".git").exists():  # an installed package, not a checkout
        return os.environ.get("GITHUB_SHA"), None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", ".",
             f":(exclude){RESULTS_DIR.relative_to(REPO_ROOT).as_posix()}"],
            cwd=root, capture_output=True, text=True, check=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("GITHUB_SHA"), None
    return commit, bool(status.strip())


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def software() -> dict:
    import torch
    import triton

    return {"triton": triton.__version__, "torch": torch.__version__,
            "python": platform.python_version()}


def gpu_environment() -> dict:
    """The GPU this process runs on: name, slug, capability, memory, driver, CUDA."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": props.name,
        "slug": gpu_slug(props.name),
        "capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": _driver_version(),
        "cuda": torch.version.cuda,
    }


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- reading and writing ---------------------------------------------------------------------


def record_path(slug: str, key: str, directory: Path | None = None) -> Path:
    return (directory or results_dir()) / slug / f"{key}.json"


def new_record(*, page: str, key: str, gpu: dict, kernel: dict) -> dict:
    """An empty record of one run of a page on the GPU described by ``gpu``."""
    commit, dirty = git_state()
    return {
        "schema": SCHEMA,
        "page": page,
        "key": key,
        "gpu": gpu,
        "software": software(),
        "date": now(),
        "commit": commit,
        "dirty": dirty,
        "kernel_source": kernel,
        "benchmarks": [],
    }


def save(record: dict, directory: Path | None = None) -> Path:
    """Write ``record`` to its place in the store (atomically) and return the path."""
    path = record_path(record["gpu"]["slug"], record["key"], directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(scratch, path)
    return path


def load(key: str | None, directory: Path | None = None) -> list[dict]:
    """Every GPU's record of page ``key``, ordered by GPU slug (``key=None``: of every page,
    in path order), each checked to be of the current schema."""
    directory = directory or results_dir()
    records = []
    for path in sorted(directory.glob(f"*/{key or '*'}.json")):
        record = json.loads(path.read_text())
        if record.get("schema") != SCHEMA:
            raise ValueError(f"{path}: schema {record.get('schema')!r}, expected {SCHEMA}; "
                             f"re-record it with `make bench PAGE={key}` on that GPU")
        record["path"] = str(path)
        records.append(record)
    return records


def recorded_ceilings(directory: Path | None = None) -> dict[tuple[str, str], dict]:
    """The one ceiling per ``(gpu slug, kind)`` that every page draws: the median of the
    ceilings that GPU's recorded runs measured, one value per run (per page's recording),
    over every page's recordings, so no page's run (a slow or a fast day) sets it alone.
    Each is the ``Ceiling`` fields (label and unit of the most recent of those runs, value
    the median) plus ``runs`` (how many) and ``first`` and ``last`` (their dates). The
    recording files are left as they are: each keeps the ceiling its own run measured."""
    found: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for record in load(None, directory):
        kinds = {}
        for entry in record["benchmarks"]:  # one run measures each kind once
            if entry.get("ceiling"):
                kinds.setdefault(entry["ceiling"]["kind"], entry["ceiling"])
        for kind, roof in kinds.items():
            found.setdefault((record["gpu"]["slug"], kind), []).append((record["date"], roof))
    unified = {}
    for key, runs in found.items():
        runs.sort(key=lambda run: run[0])
        latest = runs[-1][1]
        unified[key] = {**latest, "value": statistics.median(r["value"] for _, r in runs),
                        "runs": len(runs), "first": runs[0][0], "last": runs[-1][0]}
    return unified


def find_benchmark(record: dict, title: str) -> dict | None:
    return next((b for b in record["benchmarks"] if b["title"] == title), None)


def provenance(*, date: str, commit: str | None, dirty: bool | None, gpu: dict,
               software: dict) -> str:
    """``2026-05-01, commit 1a2b3c4; CUDA 12.8, driver 570.1; triton 3.6.0, torch 2.11.0``."""
    parts = [f"{date[:10]}, commit {(commit or 'unknown')[:7]}"
             + (" + local changes" if dirty else "")]
    cuda = ", ".join(part for part in (gpu.get("cuda") and f"CUDA {gpu['cuda']}",
                                       gpu.get("driver") and f"driver {gpu['driver']}") if part)
    if cuda:
        parts.append(cuda)
    parts.append(f"triton {software['triton']}, torch {software['torch']}")
    return "; ".join(parts)


def running_from() -> str:
    """The page's own path when it runs as a script or under sphinx-gallery (both set
    ``sys.argv[0]``), else an empty string."""
    return sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else ""
