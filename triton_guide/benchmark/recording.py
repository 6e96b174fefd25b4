"""A page's benchmarks (:class:`Benchmark`): measured live on a GPU, recorded to the results
store with ``TRITON_GUIDE_RECORD=1``, recalled from it otherwise (see the package's
docstring, :mod:`triton_guide.benchmark`)."""

from __future__ import annotations

import ast
import json
import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import results as store
from ..runtime import interpreting, timings_meaningful
from .ceilings import CEILING_UNITS, Ceiling, check_ceiling, measure_ceiling
from .runs import Results, Run
from .tables import print_table
from .timing import HOST_TIMED_ROUNDS, gpu_ms, median_ms

NO_RECORDING_TO_INTERPRET = (
    "TRITON_GUIDE_RECORD=1 needs a CUDA GPU: under the Triton interpreter timings measure "
    "numpy on the CPU and are never recorded. Run `make bench` on a GPU machine, or unset "
    "TRITON_GUIDE_RECORD."
)


class Benchmark:
    """The benchmarks of one example page: measured live on a GPU, recorded with
    ``TRITON_GUIDE_RECORD=1``, recalled from ``results/`` otherwise (module docstring).

    ``page`` is the page's path; by default ``sys.argv[0]``, which is the page both when it
    runs as a script and under sphinx-gallery. ``results_dir`` overrides where results live.
    ``recordings_from`` is the key of another page (``"matmul"``) whose recordings this page
    also recalls, for a page split out of that one: its benchmarks, recorded under the old
    page's key with the same titles, keep being shown. A GPU with a recording of this page's
    own key uses that one; a recalled recording of the other page is called stale when that
    page's kernel source changed since. Live timings are recorded under this page's own key.
    """

    def __init__(self, page: str | Path | None = None, *, results_dir: str | Path | None = None,
                 recordings_from: str | None = None):
        page = page or store.running_from()
        if not page:
            raise ValueError("Benchmark(page=None) could not tell which page is running "
                             "(sys.argv[0] is not a .py file): pass the page's path")
        self.page = Path(page).resolve()
        self.key = store.page_key(self.page)
        self.results_dir = Path(results_dir) if results_dir else store.results_dir()
        source = self.page.read_text()
        self.kernel = store.kernel_source(source)
        self.has_benchmarks = _calls_sweep(source)
        self.recording = store.recording_requested()
        if self.recording and interpreting():
            raise RuntimeError(NO_RECORDING_TO_INTERPRET)
        self.live = timings_meaningful() and not _timings_from_store()
        if self.recording and not self.live:
            raise RuntimeError(f"TRITON_GUIDE_RECORD=1 and {store.TIMINGS_ENV}=recorded "
                               "contradict each other: unset one")
        self.gpu = store.gpu_environment() if timings_meaningful() else None
        own = self.gpu["slug"] if self.live else None
        self.recordings = [r for r in store.load(self.key, self.results_dir)
                           if r["gpu"]["slug"] != own]
        for record in self.recordings:
            record["stale"] = store.stale_reason(record["kernel_source"], self.kernel)
        if recordings_from is not None:
            self._recall_from(recordings_from, own)
        self._record: dict | None = None
        self._unified: dict | None = None  # store.recorded_ceilings, read once
        self._titles: set[str] = set()
        self._stale_said: set[str] = set()  # GPUs whose stale recording has been explained

    def _recall_from(self, key: str, own: str | None) -> None:
        """Add page ``key``'s recordings for the GPUs this page has none of its own for,
        each checked for staleness against the kernel source of the page that recorded it."""
        have = {r["gpu"]["slug"] for r in self.recordings} | {own}
        borrowed = [r for r in store.load(key, self.results_dir) if r["gpu"]["slug"] not in have]
        for record in borrowed:
            source = store.REPO_ROOT / record["page"]
            current = store.kernel_source(source.read_text()) if source.is_file() else {
                "sha256": None, "modules": {}}
            record["stale"] = store.stale_reason(record["kernel_source"], current)
        self.recordings = sorted(self.recordings + borrowed, key=lambda r: r["gpu"]["slug"])

    def _relative(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(store.REPO_ROOT))
        except ValueError:
            return str(path)

    def stamp(self) -> str:
        """One line saying where this page's outputs come from: what ran it in this build
        (GPU or interpreter, versions, commit, date) and, where it has benchmarks, whether
        their timings are live or which recordings (GPU, date, commit) they are drawn from.
        Pages print it first, under their title, as a footnote to what follows."""
        commit, dirty = store.git_state()
        build = (f"commit {commit[:7]}" if commit else "commit unknown") + (
            " + local changes" if dirty else "")
        soft = store.software()
        versions = f"triton {soft['triton']}, torch {soft['torch']}"
        if self.gpu is None:
            where = "Triton interpreter on the CPU (small sizes, nothing timed)"
        else:
            where = (f"{store.short_gpu_name(self.gpu['name'])} (CUDA {self.gpu['cuda']}, "
                     f"driver {self.gpu['driver']})")
        line = f"Ran on {where}; {versions}; {build}; {store.now()[:10]}."
        if self.live and self.has_benchmarks:
            line += " Timings live"
            if self.recording:
                path = store.record_path(self.gpu["slug"], self.key, self.results_dir)
                line += f", recorded to {self._relative(path)}"
            line += "; beside them, " if self.recordings else "."
        elif self.recordings:
            line += " GPU timings "
        elif self.has_benchmarks:
            line += (" No GPU timings recorded for this page yet (on a GPU, "
                     f"`make bench PAGE={self.key}` records them).")
        if self.recordings:
            line += "recorded on " + ", ".join(
                f"{_recorded_on(record)}" for record in self.recordings) + "."
        return line

    def ceilings(self, kind: str) -> dict[str, Ceiling]:
        """The ceiling ``kind`` on each GPU this page can speak of, by GPU short name: on a
        GPU whose timings are live, measured now (:func:`measure_ceiling`); for every other
        GPU, as recorded beside this page's benchmarks, else beside another page's (the
        first in path order), so that a page can use a roof another page's benchmark
        measured, such as the copy ceiling on a compute-bound page."""
        check_ceiling(kind)
        found: dict[str, Ceiling] = {}
        if self.live:
            found[store.short_gpu_name(self.gpu["name"])] = measure_ceiling(kind)
        names = {r["gpu"]["slug"]: store.short_gpu_name(r["gpu"]["name"])
                 for r in store.load(None, self.results_dir)}
        for slug, name in sorted(names.items()):
            if self.live and slug == self.gpu["slug"]:
                continue
            roof = self.recorded_ceiling(slug, kind)
            if roof is not None and name not in found:
                found[name] = roof
        return found

    def recorded_ceiling(self, slug: str, kind: str) -> Ceiling | None:
        """GPU ``slug``'s one recorded ceiling ``kind``, the same on every page
        (:func:`results.recorded_ceilings`: the median over every page's recorded runs);
        its label says so. ``None`` when no page recorded that kind there."""
        if self._unified is None:
            self._unified = store.recorded_ceilings(self.results_dir)
        roof = self._unified.get((slug, kind))
        if roof is None:
            return None
        dates = sorted({roof["first"][:10], roof["last"][:10]})
        return Ceiling(kind, f"{roof['label']}; median of {roof['runs']} recorded "
                       f"run{'s' if roof['runs'] > 1 else ''}, {' to '.join(dates)}",
                       roof["value"], roof["unit"])

    def sweep(
        self,
        title: str,
        xs: Sequence,
        variants: dict[str, Callable[[object], Callable[[], object]]],
        rate: Callable[[object, float], float],
        *,
        label: str = "x",
        unit: str,
        ceiling: str,
        xlabel: str | None = None,
        logx: bool = True,
        gpu_time: bool = False,
        table: bool = True,
    ) -> Results:
        """Time every variant at every x on this GPU (live), or recall the recordings.

        ``title`` names the benchmark on the page and in the store. ``variants`` maps a
        name to a function that, given x, prepares inputs and returns the callable to time;
        ``rate(x, ms)`` turns a median time into the rate; ``unit`` is its unit (``"GB/s"`` or
        ``"TFLOP/s"``) and ``ceiling`` the roof measured beside it (``"copy"``,
        ``"gemm_fp16"``, ``"gemm_bf16"``), which must share that unit.

        Each call is timed as a program makes it, host included (:func:`median_ms`), in
        :data:`HOST_TIMED_ROUNDS` rounds whose median is kept, unless ``gpu_time``: then the
        host is left out (:func:`gpu_ms`, which takes a median of its own), and each
        variant, given x, returns a list of calls doing the same work on distinct copies of
        the inputs (:func:`cold_matmul_inputs` makes such copies for a matmul).
        ``table=False`` leaves out the table of every x, for a caller that prints the
        readings its own way (:func:`~triton_guide.benchmark.roofline`).
        """
        check_ceiling(ceiling)
        if CEILING_UNITS[ceiling] != unit:
            raise ValueError(f"unit={unit!r} does not match ceiling={ceiling!r}, which is in "
                             f"{CEILING_UNITS[ceiling]}: give the rate in that unit or "
                             "choose the ceiling that bounds this kernel")

        def value(x, prepare):
            return rate(x, (gpu_ms if gpu_time else median_ms)(prepare(x)))

        return self._collect(title, xs, variants, value, label=label, unit=unit,
                             ceiling=ceiling, xlabel=xlabel, logx=logx,
                             rounds=1 if gpu_time else HOST_TIMED_ROUNDS, table=table)

    def measure(
        self,
        title: str,
        xs: Sequence,
        variants: dict[str, Callable[[object], Callable[[], float]]],
        *,
        label: str = "x",
        unit: str,
        xlabel: str | None = None,
        logx: bool = True,
        of_kernels: bool = True,
        table: bool = True,
    ) -> Results:
        """Like :meth:`sweep`, for a GPU quantity that is not a rate under a roof: peak
        memory, or a wall-clock time that ``do_bench`` cannot take (a first call that
        compiles). Each variant, given x, returns a callable that makes one measurement on
        the GPU and returns it in ``unit``; it is called once. Recorded and recalled like a
        sweep; there is no ceiling. ``of_kernels=False`` for a quantity that no kernel of
        the package changes (the GPU's own sizes): a recording of it is never stale.
        ``table=False`` leaves out the table of every x, for a caller that prints the
        values its own way (one line per GPU, in the units they are counted in).
        """

        def value(x, prepare):
            return float(prepare(x)())

        return self._collect(title, xs, variants, value, label=label, unit=unit,
                             ceiling=None, xlabel=xlabel, logx=logx, of_kernels=of_kernels,
                             table=table)

    def _collect(self, title, xs, variants, value, *, label, unit, ceiling, xlabel,
                 logx, rounds=1, of_kernels=True, table=True) -> Results:
        if title in self._titles:
            raise ValueError(f"title={title!r} is used twice on this page: each benchmark "
                             "needs its own title, which names it in the store")
        self._titles.add(title)
        xs = list(xs)
        xlabel = xlabel or label
        runs = []
        if self.live:
            runs.append(self._measure(title, xs, variants, value, label, unit, ceiling,
                                      xlabel, logx, rounds))
        recalled = [self._recalled(record, title, xs, variants, ceiling, of_kernels)
                    for record in self.recordings]
        runs += [run for run in recalled if run is not None]
        if runs and table:  # one table: a group of columns per GPU, the live one first
            print_table(label, unit, runs)
        if not runs:
            print(f"{title}: no GPU timings recorded yet (on a GPU, `make bench "
                  f"PAGE={self.key}` records them); interpreter timings are never shown.")
        return Results(title, label=label, xlabel=xlabel, unit=unit, logx=logx, runs=runs)

    def _measure(self, title, xs, variants, value, label, unit, ceiling, xlabel, logx,
                 rounds) -> Run:
        roof = measure_ceiling(ceiling) if ceiling else None
        name = store.short_gpu_name(self.gpu["name"])
        print(f"{title}: measured now on {name}" + (
            f"; ceiling ({roof.label}) {roof.value:,.0f} {unit}" if roof else "")
            + (f"; median of {rounds} rounds" if rounds > 1 else ""), flush=True)
        samples = {variant: [[] for _ in xs] for variant in variants}
        for _ in range(rounds):
            for i, x in enumerate(xs):
                for variant, prepare in variants.items():
                    samples[variant][i].append(value(x, prepare))
        series = {variant: [statistics.median(values) for values in per_x]
                  for variant, per_x in samples.items()}
        if self.recording:
            self._save({
                "title": title, "label": label, "xlabel": xlabel, "unit": unit, "logx": logx,
                "x": xs, "ceiling": vars(roof).copy() if roof else None,
                "series": [{"label": variant, "unit": unit, "x": xs, "values": values}
                           for variant, values in series.items()],
            })
        commit, dirty = store.git_state()
        provenance = store.provenance(date=store.now(), commit=commit, dirty=dirty,
                                      gpu=self.gpu, software=store.software())
        return Run(gpu=name, slug=self.gpu["slug"], live=True, provenance=provenance, xs=xs,
                   series=series, unit=unit, ceiling=roof)

    def _save(self, entry: dict) -> None:
        if self._record is None:  # the first benchmark of this run replaces the old file
            self._record = store.new_record(page=self._relative(self.page), key=self.key,
                                            gpu=self.gpu, kernel=self.kernel)
        self._record["benchmarks"].append(entry)
        path = store.save(self._record, self.results_dir)
        print(f"recorded to {self._relative(path)}", flush=True)

    def _recalled(self, record: dict, title: str, xs: list, variants: dict,
                  ceiling: str | None, of_kernels: bool = True) -> Run | None:
        name = store.short_gpu_name(record["gpu"]["name"])
        entry = store.find_benchmark(record, title)
        if entry is None:
            print(f"{title}: {name} has no recording of this benchmark (on that GPU, "
                  f"`make bench PAGE={self.key}` records it).")
            return None
        series = {s["label"]: s["values"] for s in entry["series"]}
        # the GPU's one ceiling of this kind, not the one this recording's run measured
        roof = (self.recorded_ceiling(record["gpu"]["slug"], entry["ceiling"]["kind"])
                if entry.get("ceiling") else None)
        notes = []
        if entry["x"] != _as_json(xs):
            notes.append("recorded at other sizes than this page now asks for")
        missing = [variant for variant in variants if variant not in series]
        if missing:  # e.g. a variant that the GPU refused, or that the page added since
            notes.append(f"{name} has no recording of {', '.join(missing)}: not run there")
        extra = [variant for variant in series if variant not in variants]
        if extra:
            notes.append(f"recorded with {', '.join(extra)}, which this page no longer runs")
        if (roof.kind if roof else None) != ceiling:
            notes.append("recorded with another ceiling than this page now asks for")
        synthetic = "SYNTHETIC TEST DATA " if record.get("synthetic") else ""
        run = Run(gpu=name, slug=record["gpu"]["slug"], live=False,
                  provenance=synthetic + store.provenance(
                      date=record["date"], commit=record.get("commit"),
                      dirty=record.get("dirty"), gpu=record["gpu"],
                      software=record["software"]),
                  xs=entry["x"], series=series,
                  unit=entry["unit"], ceiling=roof,
                  stale=record.get("stale") if of_kernels else None, notes=notes)
        ceiling_text = (f"; ceiling ({roof.label}) {roof.value:,.0f} {roof.unit}"
                        if roof is not None else "" if ceiling is None
                        else "; no ceiling recorded")
        print(f"{title}: recorded on {_recorded_on(record, stale=bool(run.stale))}"
              f"{ceiling_text}")
        # Which files changed since a stale recording is said once per GPU on a page: the
        # line above and the stamp flag it again at every benchmark.
        said = run.stale is None or record["gpu"]["slug"] in self._stale_said
        if run.stale:
            self._stale_said.add(record["gpu"]["slug"])
        for warning in ([] if said else [run.stale]) + notes:
            print(f"  NOTE: {warning}")
        return run


def _recorded_on(record: dict, stale: bool | None = None) -> str:
    """``H100 80GB HBM3 (2026-05-01, commit 1a2b3c4)``, flagged when the kernel changed
    (``stale``: whether to flag it, by default whether the record is stale)."""
    synthetic = "SYNTHETIC TEST DATA " if record.get("synthetic") else ""
    commit = (record.get("commit") or "unknown")[:7]
    flagged = record.get("stale") if stale is None else stale
    changed = "; kernel changed since" if flagged else ""
    return (f"{synthetic}{store.short_gpu_name(record['gpu']['name'])} "
            f"({record['date'][:10]}, commit {commit}{changed})")


def _as_json(value):
    return json.loads(json.dumps(value))


def _timings_from_store() -> bool:
    return os.environ.get(store.TIMINGS_ENV, "") == "recorded"


# Helpers of this package that run a sweep of the Benchmark they are given: a page that
# calls one has benchmarks, though it may call no ``.sweep`` itself.
SWEEPING_HELPERS = ("attention_sweep", "memory_bound_sweep", "measure_device_sizes",
                    "sweep_working_sets", "place_on_roofline", "compute_bound_sweep",
                    "sweep_matmuls")


def _calls_sweep(source: str) -> bool:
    """Whether a page's source calls ``<something>.sweep(...)`` or ``.measure(...)``, or a
    helper of SWEEPING_HELPERS (by name, or as an attribute), i.e. has benchmarks."""
    def called(node):
        return getattr(node.func, "attr", None) or getattr(node.func, "id", None)

    return any(isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr in ("sweep", "measure"))
        or called(node) in SWEEPING_HELPERS) for node in ast.walk(ast.parse(source)))
