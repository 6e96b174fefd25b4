"""The results store and the pages' view of it, on the CPU.

Every record written here is SYNTHETIC (made-up numbers, marked ``"synthetic": true``) and
lives in a pytest temporary folder: nothing here is measured and nothing is committed.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from triton_guide import benchmark, results as store, runtime
from triton_guide.benchmark import Benchmark, Ceiling

ROOT = Path(__file__).resolve().parent.parent
XS = [2**12, 2**16, 2**20]
TITLE = "synthetic add"
GPUS = {  # name -> (rate scale, copy ceiling), all invented
    "NVIDIA Synthetic A100": (1.0, 1500.0),
    "NVIDIA Synthetic B200": (2.0, 4000.0),
}
PAGE_SOURCE = '''"""A synthetic page: read for its imports, never executed."""
from triton_guide import vector_add
from triton_guide.benchmark import Benchmark, gb_per_s

bench = Benchmark()
results = bench.sweep("synthetic add", [1], {}, gb_per_s, unit="GB/s", ceiling="copy")
'''


def synthetic_record(page: Path, gpu_name: str, *, kernel: dict | None = None) -> dict:
    scale, ceiling = GPUS[gpu_name]
    record = store.new_record(
        page=str(page), key=store.page_key(page),
        gpu={"name": gpu_name, "slug": store.gpu_slug(gpu_name), "capability": "0.0",
             "multiprocessors": 1, "memory_gib": 1.0, "driver": "0.0", "cuda": "0.0"},
        kernel=kernel or store.kernel_source(page.read_text()))
    record["synthetic"] = True
    record["benchmarks"].append({
        "title": TITLE, "label": "n", "xlabel": "elements", "unit": "GB/s", "logx": True,
        "x": XS,
        "ceiling": {"kind": "copy", "label": "synthetic copy", "value": ceiling,
                    "unit": "GB/s"},
        "series": [
            {"label": "triton_guide", "unit": "GB/s", "x": XS,
             "values": [100.0 * scale, 500.0 * scale, 1200.0 * scale]},
            {"label": "torch", "unit": "GB/s", "x": XS,
             "values": [90.0 * scale, 450.0 * scale, 1000.0 * scale]},
        ],
    })
    return record


@pytest.fixture
def page(tmp_path) -> Path:
    path = tmp_path / "examples" / "basics" / "07_synthetic_add.py"
    path.parent.mkdir(parents=True)
    path.write_text(PAGE_SOURCE)
    return path


@pytest.fixture
def store_dir(tmp_path, page) -> Path:
    directory = tmp_path / "results"
    for gpu_name in GPUS:
        store.save(synthetic_record(page, gpu_name), directory)
    return directory


def recalled(page, store_dir, capsys=None) -> benchmark.Results:
    bench = Benchmark(page, results_dir=store_dir)
    return bench.sweep(TITLE, XS, {"triton_guide": None, "torch": None}, None, label="n",
                       unit="GB/s", ceiling="copy", xlabel="elements")


needs_interpreter = pytest.mark.skipif(
    not runtime.interpreting(), reason="checks the CPU build (no GPU), where timings are "
    "drawn from the store")


# -- the store ------------------------------------------------------------------------------


def test_a_saved_record_loads_back_with_its_series_units_and_provenance(page, store_dir):
    loaded = {r["gpu"]["name"]: r for r in store.load("synthetic_add", store_dir)}
    bench = loaded["NVIDIA Synthetic B200"]["benchmarks"][0]
    assert (set(loaded), bench["series"][0], bench["ceiling"]["value"],
            loaded["NVIDIA Synthetic B200"]["software"]["triton"]) == (
        set(GPUS), {"label": "triton_guide", "unit": "GB/s", "x": XS,
                    "values": [200.0, 1000.0, 2400.0]}, 4000.0, store.software()["triton"])


def test_records_go_to_one_folder_per_gpu_and_one_file_per_page(page, store_dir):
    files = sorted(str(p.relative_to(store_dir)) for p in store_dir.rglob("*.json"))
    assert files == ["synthetic-a100/synthetic_add.json", "synthetic-b200/synthetic_add.json"]


@pytest.mark.parametrize("name, slug", [
    pytest.param("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3", id="h100_sxm"),
    pytest.param("NVIDIA H200", "h200", id="h200"),
    pytest.param("NVIDIA GeForce RTX 4090", "geforce-rtx-4090", id="spaces_and_case"),
])
def test_gpu_slug(name, slug):
    assert store.gpu_slug(name) == slug


def test_page_key_drops_the_number_so_renumbering_keeps_results():
    assert store.page_key("examples/core_kernels/02_softmax.py") == "softmax"


def test_every_example_page_has_its_own_results_file():
    keys = [store.page_key(p) for p in ROOT.glob("examples/*/[0-9][0-9]_*.py")]
    assert len(keys) == len(set(keys)), keys


def test_committed_results_are_real_measurements_of_the_current_schema():
    committed = sorted(store.RESULTS_DIR.glob("*/*.json"))
    bad = [str(p) for p in committed
           if json.loads(p.read_text()).get("synthetic")
           or json.loads(p.read_text()).get("schema") != store.SCHEMA]
    assert (bad, len(committed) > 0) == ([], True), \
        f"synthetic or old-schema files in {store.RESULTS_DIR}, or none at all"


# -- which source counts as a page's kernel -------------------------------------------------


def test_a_pages_kernel_source_is_the_op_modules_it_imports():
    source = (ROOT / "examples/core_kernels/02_softmax.py").read_text()
    assert store.kernel_modules(source) == ["triton_guide/hardware.py", "triton_guide/softmax.py"]


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """A copy of the package that a test may edit."""
    copy = tmp_path / "pkg" / "triton_guide"
    shutil.copytree(ROOT / "triton_guide", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_editing_the_kernel_module_marks_the_recording_stale(package_copy):
    recorded = store.kernel_source(PAGE_SOURCE, package_copy)
    kernel = package_copy / "vector_add.py"
    kernel.write_text(kernel.read_text() + "\nDEFAULT_BLOCK = 1024\n")
    reason = store.stale_reason(recorded, store.kernel_source(PAGE_SOURCE, package_copy))
    assert reason == f"{store.STALE} (triton_guide/vector_add.py changed since)"


def test_comments_docstrings_and_moves_leave_the_recording_current(package_copy):
    # code_fingerprint: the code, not how its files are written; a recording made before a
    # comment was reworded or a helper moved to another module still shows the code as run.
    kernel = package_copy / "vector_add.py"
    kernel.write_text(kernel.read_text() + "\ndef helper(x):\n    return x + 1\n")
    recorded = store.kernel_source(PAGE_SOURCE, package_copy)
    source = kernel.read_text()
    kernel.write_text(source.replace("def helper(x):\n", "def helper(x):\n    \"\"\"Doc.\"\"\"\n")
                      .replace("return x + 1", "return x + 1  # a comment"))
    assert store.stale_reason(recorded, store.kernel_source(PAGE_SOURCE, package_copy)) is None
    (package_copy / "helpers.py").write_text("def helper(x):\n    return x + 1\n")
    kernel.write_text(source.replace("\ndef helper(x):\n    return x + 1\n", "")
                      + "from .helpers import helper  # noqa: E402, F401\n")
    now = store.kernel_source(PAGE_SOURCE, package_copy)
    assert "triton_guide/helpers.py" in now["modules"] and now["sha256"] != recorded["sha256"]
    assert store.stale_reason(recorded, now) is None
    (package_copy / "helpers.py").write_text("def helper(x):\n    return x + 2\n")
    reason = store.stale_reason(recorded, store.kernel_source(PAGE_SOURCE, package_copy))
    assert reason and "triton_guide/helpers.py" in reason


def test_code_fingerprint_ignores_what_newer_pythons_add_to_the_tree():
    # Recordings are made on the GPU image's Python and read on others: ast.dump differs
    # between versions in the empty fields it shows (type_params), the fingerprint must not.
    import ast

    tree = ast.parse("def f(x):\n    return x\n")
    bare = store._canonical(tree.body[0])
    tree.body[0].type_params = []
    assert store._canonical(tree.body[0]) == bare and "type_params" not in bare


def test_editing_a_module_the_kernel_imports_marks_the_recording_stale(package_copy):
    (package_copy / "launch_helpers.py").write_text("WARPS = 4\n")
    kernel = package_copy / "vector_add.py"
    kernel.write_text("from .launch_helpers import WARPS\n" + kernel.read_text())
    recorded = store.kernel_source(PAGE_SOURCE, package_copy)
    (package_copy / "launch_helpers.py").write_text("WARPS = 8\n")
    reason = store.stale_reason(recorded, store.kernel_source(PAGE_SOURCE, package_copy))
    assert "triton_guide/launch_helpers.py" in (reason or "")


def test_editing_shared_machinery_leaves_the_recording_current(package_copy):
    recorded = store.kernel_source(PAGE_SOURCE, package_copy)
    runtime_module = package_copy / "runtime.py"
    runtime_module.write_text(runtime_module.read_text() + "\n# an edit\n")
    assert store.stale_reason(recorded, store.kernel_source(PAGE_SOURCE, package_copy)) is None


# -- a CPU build draws from the store -------------------------------------------------------


@needs_interpreter
def test_without_a_gpu_sweep_returns_each_gpus_recording(page, store_dir):
    runs = recalled(page, store_dir)
    assert [(r.gpu, r.live, r["triton_guide"][-1]) for r in runs] == [
        ("Synthetic A100", False, 1200.0), ("Synthetic B200", False, 2400.0)]


@needs_interpreter
def test_the_plot_draws_both_gpus_variants_and_ceilings(page, store_dir):
    import matplotlib.pyplot as plt

    figure = recalled(page, store_dir).plot()
    today = store.load("synthetic_add", store_dir)[0]["date"][:10]
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    plt.close(figure)
    assert labels == [
        "Synthetic A100: triton_guide", "Synthetic A100: torch",
        f"Synthetic A100: ceiling, synthetic copy; median of 1 recorded run, {today} "
        "1,500 GB/s",
        "Synthetic B200: triton_guide", "Synthetic B200: torch",
        f"Synthetic B200: ceiling, synthetic copy; median of 1 recorded run, {today} "
        "4,000 GB/s"]


@needs_interpreter
def test_the_plot_names_where_each_gpus_numbers_come_from(page, store_dir):
    import matplotlib.pyplot as plt

    figure = recalled(page, store_dir).plot()
    footers = [text.get_text() for text in figure.texts]
    plt.close(figure)
    assert [f.split(",")[0] for f in footers] == [
        "Synthetic A100: recorded", "Synthetic B200: recorded"]


@needs_interpreter
def test_the_summary_has_one_column_per_gpu_with_ratios_from_the_data(page, store_dir, capsys):
    rows = recalled(page, store_dir).summary(ratios=[("triton_guide", "torch")])
    assert (rows["triton_guide / ceiling"], rows["triton_guide / torch"]) == (
        {"Synthetic A100": 1200 / 1500, "Synthetic B200": 2400 / 4000},
        {"Synthetic A100": 1.2, "Synthetic B200": 1.2})


@needs_interpreter
def test_a_changed_kernel_marks_recalled_runs_stale(page, store_dir, monkeypatch):
    current = store.kernel_source(PAGE_SOURCE)
    changed = {"modules": {m: "0" * 64 for m in current["modules"]}, "sha256": "0" * 64}
    monkeypatch.setattr(store, "kernel_source", lambda source: changed)
    runs = recalled(page, store_dir)
    assert [run.stale for run in runs] == [
        f"{store.STALE} (triton_guide/vector_add.py changed since)"] * 2


SPLIT_SOURCE = PAGE_SOURCE.replace("from triton_guide import vector_add",
                                  "from triton_guide import softmax").replace(
    "Benchmark()", 'Benchmark(recordings_from="synthetic_add")')


@pytest.fixture
def split_page(page) -> Path:
    """A page split out of the synthetic page, importing other kernels than it."""
    path = page.parent.parent / "hopper" / "01_synthetic_add_fast.py"
    path.parent.mkdir(parents=True)
    path.write_text(SPLIT_SOURCE)
    return path


def recalled_by_split(split_page, store_dir) -> benchmark.Results:
    bench = Benchmark(split_page, results_dir=store_dir, recordings_from="synthetic_add")
    return bench.sweep(TITLE, XS, {"triton_guide": None, "torch": None}, None, label="n",
                       unit="GB/s", ceiling="copy", xlabel="elements")


@needs_interpreter
def test_a_split_page_recalls_the_recordings_of_the_page_it_came_from(split_page, store_dir):
    runs = recalled_by_split(split_page, store_dir)
    assert [(r.gpu, r["triton_guide"][-1], r.stale) for r in runs] == [
        ("Synthetic A100", 1200.0, None), ("Synthetic B200", 2400.0, None)]
    assert Benchmark(split_page, results_dir=store_dir).recordings == []  # only when asked


@needs_interpreter
def test_a_split_pages_own_recording_comes_before_the_borrowed_one(page, split_page,
                                                                   store_dir):
    own = synthetic_record(split_page, "NVIDIA Synthetic B200")
    own["benchmarks"][0]["series"][0]["values"] = [1.0, 2.0, 3.0]
    store.save(own, store_dir)
    runs = recalled_by_split(split_page, store_dir)
    assert [(r.gpu, r["triton_guide"][-1]) for r in runs] == [
        ("Synthetic A100", 1200.0), ("Synthetic B200", 3.0)]


@needs_interpreter
def test_a_borrowed_recording_is_stale_when_the_recording_pages_kernels_changed(
        page, split_page, store_dir):
    page.write_text(PAGE_SOURCE.replace("import vector_add", "import vector_add, softmax"))
    runs = recalled_by_split(split_page, store_dir)
    assert len(runs) == 2 and all(
        run.stale.startswith(store.STALE) and "triton_guide/softmax.py" in run.stale
        for run in runs)


@needs_interpreter
def test_no_recording_says_so_in_one_line_and_draws_nothing(page, tmp_path, capsys):
    runs = recalled(page, tmp_path / "empty")
    printed = capsys.readouterr().out.strip().splitlines()
    assert (len(runs), runs.plot(), printed) == (0, None, [
        f"{TITLE}: no GPU timings recorded yet (on a GPU, `make bench PAGE=synthetic_add` "
        "records them); interpreter timings are never shown."])


def test_compare_gives_the_ratio_range_without_the_slow_readings(capsys):
    # 12 bytes per element; torch's call at n = 2**14 took 16 us, four times the 4 us of
    # the call at 2**16 that moves four times the bytes: a slow reading, left out.
    xs = [2**12, 2**14, 2**16, 2**18]
    micros = {"ours": [2.0, 3.0, 4.0, 9.0], "torch": [2.5, 16.0, 4.0, 9.0]}
    series = {name: [12 * x / (t * 1e3) for x, t in zip(xs, times)]
              for name, times in micros.items()}
    run = benchmark.Run(gpu="Synthetic A100", slug="a100", live=False, provenance="",
                        xs=xs, series=series, unit="GB/s",
                        ceiling=Ceiling(kind="copy", label="copy", value=1.0, unit="GB/s"))
    results = benchmark.Results("synthetic", label="n", xlabel="n", unit="GB/s", logx=True,
                                runs=[run])
    assert run.slow_readings("torch", lambda n: 12 * n) == [1]
    low, high = results.compare("ours", "torch", work=lambda n: 12 * n)["Synthetic A100"]
    assert (low, high) == pytest.approx((1.0, 2.5 / 2.0))
    printed = capsys.readouterr().out
    assert "left out, a slow reading: torch at n = 16,384, 16.0 us per call" in printed
    assert "from 1.00x (n = 65,536) to 1.25x (n = 4,096) torch's" in printed


def test_per_call_prints_times_and_their_growth_against_the_work(capsys):
    xs = [1024, 4096]
    series = {"ours": [12 * x / (t * 1e3) for x, t in zip(xs, [10.0, 12.0])]}  # us per call
    run = benchmark.Run(gpu="Synthetic A100", slug="a100", live=False, provenance="",
                        xs=xs, series=series, unit="GB/s", ceiling=None)
    benchmark.Results("norm", label="hidden", xlabel="hidden", unit="GB/s", logx=True,
                      runs=[run]).per_call(["ours"], work=lambda x: 12 * x)
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, us per call (ours) by hidden: 1024: 10; 4096: 12",
        "Synthetic A100, time per call at hidden 4096 over 1024 (4x the work): ours 1.2x"]


def test_each_gpu_keeps_its_colour_whatever_the_other_gpus():
    assert benchmark.gpu_colour("H100 80GB HBM3") == benchmark.GPU_COLOURS["H100"]
    assert benchmark.gpu_colour("H200") == benchmark.GPU_COLOURS["H200"]
    assert benchmark.gpu_colour("H100 80GB HBM3") != benchmark.gpu_colour("H200")
    other = benchmark.gpu_colour("Radeon Instinct MI300X")
    assert other == benchmark.gpu_colour("Radeon Instinct MI300X")
    assert other not in benchmark.GPU_COLOURS.values()


@needs_interpreter
def test_marks_are_one_dashed_line_per_gpu_with_an_x(page, store_dir):
    figure = recalled(page, store_dir).plot()
    axes = figure.axes[0]
    lines_before = len(axes.lines)
    benchmark.mark_each_gpu(figure, {"Synthetic A100": 2.0**16, "Synthetic B200": math.nan},
                            "L2 {x:.0f} elements")
    added = axes.lines[lines_before:]
    assert [(line.get_xdata()[0], line.get_linestyle(), line.get_color()) for line in added] == [
        (2.0**16, "--", benchmark.gpu_colour("Synthetic A100"))]
    assert " Synthetic A100: L2 65536 elements" in [text.get_text() for text in axes.texts]
    benchmark.mark_each_gpu(None, {"Synthetic A100": 1.0}, "{x}")  # nothing drawn: no error


@needs_interpreter
def test_device_sizes_come_back_from_each_gpus_recording(page, tmp_path, capsys,
                                                        monkeypatch):
    directory = tmp_path / "sizes"
    for gpu_name, l2 in (("NVIDIA Synthetic A100", 40.0), ("NVIDIA Synthetic B200", 126.0)):
        record = synthetic_record(page, gpu_name)
        names = ["SMs", "L2 cache (MiB)", "HBM (GiB)"]  # one size left out of the recording
        record["benchmarks"].append({
            "title": "device sizes", "label": "property", "xlabel": "property",
            "unit": "unit in its name", "logx": True, "x": names, "ceiling": None,
            "series": [{"label": "size", "unit": "unit in its name", "x": names,
                        "values": [108.0, l2, 80.0]}]})
        store.save(record, directory)
    current = store.kernel_source(PAGE_SOURCE)  # every recording stale: sizes never are
    changed = {"modules": {m: "0" * 64 for m in current["modules"]}, "sha256": "0" * 64}
    monkeypatch.setattr(store, "kernel_source", lambda source: changed)
    sizes = benchmark.measure_device_sizes(Benchmark(page, results_dir=directory))
    assert {gpu: size["L2 cache (MiB)"] for gpu, size in sizes.items()} == {
        "Synthetic A100": 40.0, "Synthetic B200": 126.0}
    assert math.isnan(sizes["Synthetic A100"]["shared memory per SM (KiB)"])
    printed = capsys.readouterr().out
    assert ("Synthetic B200: 108 SMs, L2 126 MiB, shared memory nan KiB per SM, HBM 80 GiB"
            in printed.splitlines())
    assert "property" not in printed  # printed once: a line per GPU, no table beside it
    assert store.STALE not in printed and "kernel changed since" not in printed


def test_lines_within_three_percent_everywhere_coincide():
    lines = {"H100: ours": [100.0, 200.0, 400.0], "H200: ours": [101.0, 198.0, 410.0],
             "H200: torch": [100.0, 260.0, 400.0], "only one point": [100.0, math.nan,
                                                                      math.nan]}
    assert benchmark.coinciding(lines) == [("H100: ours", "H200: ours")]


def test_a_figure_says_when_two_lines_coincide_and_goes_log_over_decades():
    xs = [2**12, 2**16, 2**20]
    runs = [benchmark.Run(gpu=gpu, slug=gpu.lower(), live=False, provenance="synthetic",
                          xs=xs, series={"ours": [10.0, 500.0, 2000.0]}, unit="GB/s",
                          ceiling=None) for gpu in ("H100", "H200")]
    figure = benchmark.Results("two gpus", label="n", xlabel="n", unit="GB/s", logx=True,
                               runs=runs).plot()
    texts = [text.get_text() for text in figure.texts]
    assert texts[0] == ("H100: ours and H200: ours coincide (within 3% at every n): one "
                        "line hides the other")
    assert figure.axes[0].get_yscale() == "log"
    assert [legend.get_title().get_color() for legend in figure.legends] == [
        benchmark.GPU_COLOURS["H100"], benchmark.GPU_COLOURS["H200"]]


# -- the stamp --------------------------------------------------------------------------------


@needs_interpreter
def test_the_stamp_names_the_interpreter_and_every_recording_in_one_line(page, store_dir):
    stamp = Benchmark(page, results_dir=store_dir).stamp()
    commit = (store.git_state()[0] or "unknown")[:7]
    assert "\n" not in stamp
    assert stamp.startswith("Ran on Triton interpreter on the CPU (small sizes, nothing "
                            f"timed); triton {store.software()['triton']}, torch ")
    assert f"commit {commit}" in stamp and f"; {store.now()[:10]}." in stamp
    recorded = f"({store.now()[:10]}, commit {commit})"  # the synthetic records' own
    assert stamp.endswith(
        f" GPU timings recorded on SYNTHETIC TEST DATA Synthetic A100 {recorded}, "
        f"SYNTHETIC TEST DATA Synthetic B200 {recorded}.")


@needs_interpreter
def test_the_stamp_flags_a_stale_recording(page, store_dir, monkeypatch):
    monkeypatch.setattr(store, "kernel_source",
                        lambda source: {"modules": {}, "sha256": "changed"})
    stamp = Benchmark(page, results_dir=store_dir).stamp()
    assert stamp.count("; kernel changed since)") == 2


@needs_interpreter
def test_the_stamp_says_when_nothing_is_recorded(page, tmp_path):
    stamp = Benchmark(page, results_dir=tmp_path / "empty").stamp()
    assert stamp.endswith(" No GPU timings recorded for this page yet (on a GPU, "
                          "`make bench PAGE=synthetic_add` records them).")


# -- recording ------------------------------------------------------------------------------


@needs_interpreter
def test_the_interpreter_refuses_to_record(page, tmp_path, monkeypatch):
    monkeypatch.setenv(store.RECORD_ENV, "1")
    with pytest.raises(RuntimeError, match="TRITON_GUIDE_RECORD=1 needs a CUDA GPU"):
        Benchmark(page, results_dir=tmp_path)


@needs_interpreter
def test_record_script_refuses_without_a_gpu():
    done = subprocess.run([sys.executable, "benchmarks/record.py", "--page", "vector_add"],
                          cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, "needs a CUDA GPU" in done.stderr) == (2, True)


@needs_interpreter
@pytest.mark.parametrize("timer", ["median_ms", "host_us", "gpu_ms", "queued_ms"])
def test_timers_refuse_under_the_interpreter(timer):
    ran = []
    call = lambda: ran.append(1)  # noqa: E731
    with pytest.raises(RuntimeError, match="Timings need a GPU"):
        getattr(benchmark, timer)(call if timer in ("median_ms", "host_us") else [call])
    assert ran == []


def fake_live_gpu(monkeypatch) -> None:
    """The GPU code path with the GPU faked: its identity is a SYNTHETIC stand-in."""
    monkeypatch.setattr(benchmark.recording, "interpreting", lambda: False)
    monkeypatch.setattr(benchmark.recording, "timings_meaningful", lambda: True)
    monkeypatch.setattr(store, "gpu_environment", lambda: {
        "name": "Synthetic Live GPU", "slug": "synthetic-live-gpu", "driver": None,
        "cuda": None})


def fake_timed_gpu(monkeypatch) -> None:
    """:func:`fake_live_gpu` with the timer and the ceiling faked too: a variant's callable
    returns its own time in ms, and the copy ceiling is 999 GB/s."""
    fake_live_gpu(monkeypatch)
    monkeypatch.setattr(benchmark.recording, "median_ms", lambda fn: fn())
    monkeypatch.setattr(benchmark.recording, "measure_ceiling",
                        lambda kind: Ceiling(kind, "synthetic copy", 999.0, "GB/s"))


# Timed under fake_timed_gpu: x / 1000 and x / 500 ms, so x / ms gives 1000 and 500 GB/s.
TIMED_VARIANTS = {"triton_guide": lambda x: lambda: x / 1000,
                  "torch": lambda x: lambda: x / 500}


def test_a_live_run_writes_what_it_measured(page, tmp_path, monkeypatch):
    """The GPU code path with the GPU faked (:func:`fake_timed_gpu`); the store is a
    temporary folder."""
    fake_timed_gpu(monkeypatch)
    monkeypatch.setenv(store.RECORD_ENV, "1")
    directory = tmp_path / "results"
    bench = Benchmark(page, results_dir=directory)
    bench.sweep(TITLE, XS, TIMED_VARIANTS, lambda x, ms: x / ms, label="n", unit="GB/s",
                ceiling="copy")
    (written,) = store.load("synthetic_add", directory)
    entry = written["benchmarks"][0]
    assert ([s["values"] for s in entry["series"]], entry["ceiling"]["value"],
            written["kernel_source"]) == ([[1000.0] * 3, [500.0] * 3], 999.0,
                                          store.kernel_source(PAGE_SOURCE))


def test_host_timed_sweeps_keep_the_median_of_their_rounds(page, tmp_path, monkeypatch):
    """A slow spell of the host spoils one round of one point; the median drops it. The
    rounds run one after the other, each over every x and variant."""
    fake_timed_gpu(monkeypatch)
    order = []

    def spoiled_once(x):
        def call():
            order.append(x)
            return x / (100 if order.count(x) == 1 and x == XS[1] else 1000)
        return call

    bench = Benchmark(page, results_dir=tmp_path / "results")
    results = bench.sweep(TITLE, XS, {"spoiled": spoiled_once, **TIMED_VARIANTS},
                          lambda x, ms: x / ms, label="n", unit="GB/s", ceiling="copy")
    (run,) = results
    assert (run["spoiled"], run["torch"]) == ([1000.0] * 3, [500.0] * 3)
    assert order == XS * benchmark.HOST_TIMED_ROUNDS


def test_gpu_time_sweeps_time_each_variants_list_of_calls(page, tmp_path, monkeypatch):
    """With ``gpu_time`` a variant returns calls on copies of its inputs, and gpu_ms (faked
    here: the mean of what the calls return) times them; median_ms is not used."""
    fake_timed_gpu(monkeypatch)
    monkeypatch.setattr(benchmark.recording, "median_ms", None)
    monkeypatch.setattr(benchmark.recording, "gpu_ms",
                        lambda calls: sum(c() for c in calls) / len(calls))
    variants = {"triton_guide": lambda x: [lambda: x / 1000, lambda: x / 3000],
                "torch": lambda x: [lambda: x / 500]}
    bench = Benchmark(page, results_dir=tmp_path / "results")
    results = bench.sweep(TITLE, XS, variants, lambda x, ms: x / ms, label="n", unit="GB/s",
                          ceiling="copy", gpu_time=True)
    (run,) = results
    assert (run["triton_guide"], run["torch"]) == ([1500.0] * 3, [500.0] * 3)


def test_ceilings_come_from_any_pages_recordings_per_gpu(page, store_dir, monkeypatch):
    # Recalled only, as in a CPU build: on a GPU the live one would be measured too.
    monkeypatch.setattr(benchmark.recording, "timings_meaningful", lambda: False)
    record = json.loads((store_dir / "synthetic-b200" / "synthetic_add.json").read_text())
    record["benchmarks"][0]["ceiling"] = {"kind": "gemm_fp16", "label": "synthetic gemm",
                                          "value": 1234.0, "unit": "TFLOP/s"}
    (store_dir / "synthetic-b200" / "another_page.json").write_text(json.dumps(record))
    # two more runs' copy ceilings on other pages: the GPU's is the median of the three
    for key, value in (("a_page", 1.0), ("z_page", 3000.0)):
        record["benchmarks"][0]["ceiling"] = {"kind": "copy", "label": "synthetic copy",
                                              "value": value, "unit": "GB/s"}
        (store_dir / "synthetic-b200" / f"{key}.json").write_text(json.dumps(record))
    bench = Benchmark(page, results_dir=store_dir)
    copies, gemms = bench.ceilings("copy"), bench.ceilings("gemm_fp16")
    assert ({gpu: c.value for gpu, c in copies.items()},
            {gpu: c.value for gpu, c in gemms.items()}) == (
        {"Synthetic A100": 1500.0, "Synthetic B200": 3000.0}, {"Synthetic B200": 1234.0})


def three_pages_with_different_ceilings(tmp_path) -> tuple[list[Path], Path]:
    """Three synthetic pages recorded on one GPU on different days, each run having measured
    its own copy ceiling: 1500, 1000 and 1200 GB/s, whose median is 1200."""
    directory = tmp_path / "three_pages"
    pages = []
    for key, date, ceiling in (("first_page", "2026-01-01T00:00:00Z", 1500.0),
                               ("second_page", "2026-02-01T00:00:00Z", 1000.0),
                               ("third_page", "2026-03-01T00:00:00Z", 1200.0)):
        path = tmp_path / "examples" / "basics" / f"0_{key}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PAGE_SOURCE)
        record = synthetic_record(path, "NVIDIA Synthetic A100")
        record["date"] = date
        record["benchmarks"][0]["ceiling"]["value"] = ceiling
        store.save(record, directory)
        pages.append(path)
    return pages, directory


@needs_interpreter
def test_every_page_draws_one_ceiling_per_gpu_the_median_of_its_runs(tmp_path, capsys):
    pages, directory = three_pages_with_different_ceilings(tmp_path)
    on_disk = [json.loads((directory / "synthetic-a100" / f"{page.stem[2:]}.json")
                          .read_text())["benchmarks"][0]["ceiling"]["value"] for page in pages]
    drawn = []
    for page in pages[:2]:  # the two pages whose own runs measured 1500 and 1000
        bench = Benchmark(page, results_dir=directory)
        results = bench.sweep(TITLE, XS, {"triton_guide": None, "torch": None}, None,
                              label="n", unit="GB/s", ceiling="copy")
        (run,) = results
        rows = results.summary()
        drawn.append((run.ceiling.value, run.fraction_of_ceiling("triton_guide"),
                       rows["triton_guide / ceiling"],
                       bench.ceilings("copy")["Synthetic A100"].value))
    printed = capsys.readouterr().out
    # the files keep what their runs measured; both pages draw the median, 1200 GB/s
    assert on_disk == [1500.0, 1000.0, 1200.0]
    assert drawn == [(1200.0, 1.0, {"Synthetic A100": 1.0}, 1200.0)] * 2
    assert printed.count("ceiling (synthetic copy; median of 3 recorded runs, 2026-01-01 to "
                         "2026-03-01) 1,200 GB/s") == 2
    assert "1,500 GB/s" not in printed and "1,000 GB/s" not in printed


def test_a_live_gpu_draws_the_recorded_gpus_one_ceiling(tmp_path, monkeypatch):
    pages, directory = three_pages_with_different_ceilings(tmp_path)
    fake_timed_gpu(monkeypatch)
    bench = Benchmark(pages[0], results_dir=directory)
    results = bench.sweep(TITLE, XS, TIMED_VARIANTS, lambda x, ms: x / ms, label="n",
                          unit="GB/s", ceiling="copy")
    assert {run.gpu: run.ceiling.value for run in results.runs} == {
        "Synthetic Live GPU": 999.0, "Synthetic A100": 1200.0}
    assert {gpu: c.value for gpu, c in bench.ceilings("copy").items()} == {
        "Synthetic Live GPU": 999.0, "Synthetic A100": 1200.0}


def test_ceilings_read_other_pages_through_the_schema_check(page, store_dir, monkeypatch):
    monkeypatch.setattr(benchmark.recording, "timings_meaningful", lambda: False)
    record = json.loads((store_dir / "synthetic-b200" / "synthetic_add.json").read_text())
    record["schema"] = store.SCHEMA + 1
    (store_dir / "synthetic-b200" / "another_page.json").write_text(json.dumps(record))
    bench = Benchmark(page, results_dir=store_dir)
    with pytest.raises(ValueError, match=r"another_page\.json: schema"):
        bench.ceilings("copy")


def test_a_live_gpu_measures_its_own_ceiling_and_recalls_the_others(page, store_dir,
                                                                     monkeypatch):
    fake_timed_gpu(monkeypatch)
    bench = Benchmark(page, results_dir=store_dir)
    assert {gpu: c.value for gpu, c in bench.ceilings("copy").items()} == {
        "Synthetic Live GPU": 999.0, "Synthetic A100": 1500.0, "Synthetic B200": 4000.0}


def test_unit_and_ceiling_must_agree(page, tmp_path):
    bench = Benchmark(page, results_dir=tmp_path)
    with pytest.raises(ValueError, match="unit='GB/s' does not match ceiling='gemm_fp16'"):
        bench.sweep(TITLE, XS, {}, None, unit="GB/s", ceiling="gemm_fp16")


def test_measure_records_each_value_once_with_no_ceiling(page, tmp_path, monkeypatch):
    fake_live_gpu(monkeypatch)
    monkeypatch.setenv(store.RECORD_ENV, "1")
    calls = []

    def peak(x):
        return lambda: calls.append(x) or x / 4

    bench = Benchmark(page, results_dir=tmp_path / "results")
    results = bench.measure("synthetic peak", XS, {"ours": peak}, label="n", unit="GiB")
    (written,) = store.load("synthetic_add", tmp_path / "results")
    entry = written["benchmarks"][0]
    assert (calls, entry["series"][0]["values"], entry["ceiling"], entry["unit"]) == (
        XS, [x / 4 for x in XS], None, "GiB")
    assert "ceiling (GiB)" not in results.summary()


def save_peak_recording(page, directory, labels):
    """A recording on a synthetic A100 of "synthetic peak" (GiB over XS, no ceiling), one
    series per label, each 0.5, 1.0, 2.0."""
    record = synthetic_record(page, "NVIDIA Synthetic A100")
    record["benchmarks"] = [{
        "title": "synthetic peak", "label": "n", "xlabel": "n", "unit": "GiB", "logx": True,
        "x": XS, "ceiling": None,
        "series": [{"label": label, "unit": "GiB", "x": XS, "values": [0.5, 1.0, 2.0]}
                   for label in labels]}]
    store.save(record, directory)


@needs_interpreter
def test_a_measurement_is_recalled_and_drawn_without_a_ceiling(page, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    save_peak_recording(page, tmp_path / "results", ["ours"])
    bench = Benchmark(page, results_dir=tmp_path / "results")
    (run,) = bench.measure("synthetic peak", XS, {"ours": None}, label="n", unit="GiB")
    figure = benchmark.Results("synthetic peak", label="n", xlabel="n", unit="GiB",
                               logx=True, runs=[run]).plot()
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    plt.close(figure)
    assert (run["ours"], run.notes, labels) == ([0.5, 1.0, 2.0], [], ["Synthetic A100: ours"])


@needs_interpreter
def test_a_recording_without_a_variant_the_page_asks_for_says_which(page, tmp_path, capsys):
    # e.g. a variant a GPU refused (warp_specialize on the H100): the note names it.
    save_peak_recording(page, tmp_path / "results", ["ours", "old"])
    bench = Benchmark(page, results_dir=tmp_path / "results")
    (run,) = bench.measure("synthetic peak", XS, {"ours": None, "ours, specialised": None},
                           label="n", unit="GiB")
    assert run.notes == ["Synthetic A100 has no recording of ours, specialised: not run there",
                         "recorded with old, which this page no longer runs"]
    assert "NOTE: Synthetic A100 has no recording of ours, specialised" in capsys.readouterr().out


@needs_interpreter
def test_categorical_x_keeps_its_order_in_the_table_and_summary(page, tmp_path, capsys):
    kernels = ["vector_add", "softmax", "matmul"]
    record = synthetic_record(page, "NVIDIA Synthetic A100")
    record["benchmarks"] = [{
        "title": "synthetic kernels", "label": "kernel", "xlabel": "kernel", "unit": "GB/s",
        "logx": False, "x": kernels,
        "ceiling": {"kind": "copy", "label": "synthetic copy", "value": 1500.0, "unit": "GB/s"},
        "series": [{"label": "achieved", "unit": "GB/s", "x": kernels,
                    "values": [900.0, 800.0, 100.0]}]}]
    store.save(record, tmp_path / "results")
    bench = Benchmark(page, results_dir=tmp_path / "results")
    results = bench.sweep("synthetic kernels", kernels, {"achieved": None}, None,
                          label="kernel", unit="GB/s", ceiling="copy", logx=False)
    rows = results.summary()
    table = [line.split("|")[0].strip() for line in capsys.readouterr().out.splitlines()
             if line.split("|")[0].strip() in kernels]
    assert (table, rows["largest kernel"]) == (kernels, {"Synthetic A100": "matmul"})


def test_git_state_names_the_checkout_and_whether_it_has_local_changes(monkeypatch):
    monkeypatch.delenv(store.COMMIT_ENV, raising=False)
    commit, dirty = store.git_state()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=store.REPO_ROOT,
                          capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert commit == head.stdout.strip()
    assert isinstance(dirty, bool)


def test_a_named_commit_leaves_local_changes_unknown(monkeypatch):
    monkeypatch.setenv(store.COMMIT_ENV, "0123abc")
    assert store.git_state() == ("0123abc", None)


def _two_gpu_store(page, directory, kernels, names):
    for gpu_name in GPUS:
        record = synthetic_record(page, gpu_name)
        record["benchmarks"] = [{
            "title": "synthetic kernels", "label": "kernel", "xlabel": "kernel",
            "unit": "GB/s", "logx": False, "x": kernels,
            "ceiling": {"kind": "copy", "label": "synthetic copy", "value": 1500.0,
                        "unit": "GB/s"},
            "series": [{"label": name, "unit": "GB/s", "x": kernels,
                        "values": [100.0 * (i + 1)] * len(kernels)}
                       for i, name in enumerate(names)]}]
        store.save(record, directory)
    bench = Benchmark(page, results_dir=directory)
    return bench.sweep("synthetic kernels", kernels, dict.fromkeys(names), None,
                       label="kernel", unit="GB/s", ceiling="copy", logx=False)


@needs_interpreter
@pytest.mark.parametrize("kernels, tables", [
    (["add", "mul"], 1),  # two groups of two series fit side by side
    (["a_kernel_name_long_enough_to_widen_the_first_column_alone", "mul"], 2),
])
def test_a_table_too_wide_for_an_output_block_prints_one_per_gpu(page, tmp_path, capsys,
                                                                 kernels, tables):
    _two_gpu_store(page, tmp_path / "results", kernels, ["ours", "torch"])
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if line.rstrip().endswith("(GB/s)")]
    table_lines = [line for line in lines if "|" in line]
    assert len(headers) == tables, "\n".join(lines)
    assert max(map(len, table_lines)) <= benchmark.TABLE_WIDTH, "\n".join(lines)


def test_a_live_run_prints_its_table_before_the_recorded_gpus(page, store_dir, monkeypatch,
                                                             capsys):
    """On a GPU build the live numbers are tabled like the recordings, a group of columns
    per GPU, the live one first (:func:`fake_timed_gpu`; nothing is recorded)."""
    fake_timed_gpu(monkeypatch)
    monkeypatch.delenv(store.RECORD_ENV, raising=False)
    bench = Benchmark(page, results_dir=store_dir)
    bench.sweep(TITLE, XS, TIMED_VARIANTS, lambda x, ms: x / ms, label="n", unit="GB/s",
                ceiling="copy")
    lines = capsys.readouterr().out.splitlines()
    headers = [line for line in lines if line.rstrip().endswith("(GB/s)")]
    groups = [group.strip() for header in headers
              for group in header.removesuffix("(GB/s)").split("|")[1:]]
    first_row = next(line for line in lines if line.startswith(f"{XS[-1]:,}".rjust(9)))
    # a table per GPU here: three groups side by side would be wider than an output block
    assert groups == ["Synthetic Live GPU", "Synthetic A100", "Synthetic B200"], headers
    assert first_row.split("|")[1].split() == ["1,000", "500"], first_row  # whole: no decimals


def test_a_sweep_asked_for_no_table_prints_none(page, store_dir, monkeypatch, capsys):
    fake_timed_gpu(monkeypatch)
    monkeypatch.delenv(store.RECORD_ENV, raising=False)
    results = Benchmark(page, results_dir=store_dir).sweep(
        TITLE, XS, TIMED_VARIANTS, lambda x, ms: x / ms, label="n", unit="GB/s",
        ceiling="copy", table=False)
    printed = capsys.readouterr().out
    assert not any(line.rstrip().endswith("(GB/s)") for line in printed.splitlines()), printed
    assert [run.gpu for run in results] == ["Synthetic Live GPU", "Synthetic A100",
                                            "Synthetic B200"]  # the readings are all there


def test_time_per_call_is_worked_back_from_the_rate():
    from triton_guide.benchmark import gb_per_s, us_per_call

    # 1 MB in 0.5 ms is 2 GB/s; back from 2 GB/s, 1 MB takes 500 microseconds
    assert gb_per_s(1e6, 0.5) == 2.0 and us_per_call(1e6, 2.0) == 500.0


@pytest.mark.parametrize("times, expected", [
    pytest.param([4.4, 4.3, 4.6, 5.0], [], id="host_bound_level_times"),
    pytest.param([23.9, 4.0, 4.2, 6.0], [0], id="first_call_slower_than_4x_the_work"),
    pytest.param([19.1, 73.3, 17.2, 40.0], [1], id="middle_reading_slower_than_a_later_one"),
    pytest.param([10.0, 14.9, 10.0], [], id="within_the_factor"),
    pytest.param([10.0, 15.1, 10.0], [1], id="just_past_the_factor"),
    pytest.param([], [], id="no_readings"),
])
def test_out_of_line_finds_readings_that_more_work_beat(times, expected):
    assert benchmark.out_of_line(times) == expected


def test_matmul_rate_over_cold_inputs(monkeypatch):
    # A 64 KiB target: the real 256 MiB one would take 1.2 million pairs of this size.
    monkeypatch.setattr(benchmark.timing, "COLD_BYTES", 64 * 1024)
    pairs = benchmark.cold_matmul_inputs(3, 5, 7, torch.float32, device="cpu")
    # enough copies to overrun L2, each a fresh 3 x 7 by 7 x 5 pair
    assert len(pairs) == benchmark.copies_for_cold_cache((3 * 7 + 7 * 5) * 4) > 100
    assert all(a.shape == (3, 7) and b.shape == (7, 5) for a, b in pairs)
    assert not torch.equal(pairs[0][0], pairs[1][0])
    seen = []

    def fake_gpu_ms(calls):  # runs each call once and says each took 2 ms
        for call in calls:
            call()
        return 2.0

    monkeypatch.setattr(benchmark.timing, "gpu_ms", fake_gpu_ms)
    rate = benchmark.matmul_tflop_per_s(lambda a, b: seen.append((a, b)), pairs)
    assert rate == 2 * 3 * 5 * 7 / 2.0 * 1e-9
    assert [id(a) for a, _ in seen] == [id(a) for a, _ in pairs]


@needs_interpreter
def test_a_stale_recording_is_explained_once_per_gpu_and_flagged_at_every_benchmark(
        page, tmp_path, monkeypatch, capsys):
    directory = tmp_path / "two"
    for gpu_name in GPUS:
        record = synthetic_record(page, gpu_name)
        record["benchmarks"].append(dict(record["benchmarks"][0], title="synthetic add 2"))
        store.save(record, directory)
    current = store.kernel_source(PAGE_SOURCE)
    changed = {"modules": {m: "0" * 64 for m in current["modules"]}, "sha256": "0" * 64}
    monkeypatch.setattr(store, "kernel_source", lambda source: changed)
    bench = Benchmark(page, results_dir=directory)
    capsys.readouterr()
    for title in (TITLE, "synthetic add 2"):
        bench.sweep(title, XS, {"triton_guide": None, "torch": None}, None, label="n",
                    unit="GB/s", ceiling="copy")
    printed = capsys.readouterr().out
    assert printed.count(f"NOTE: {store.STALE}") == len(GPUS)  # the first benchmark only
    assert printed.count("; kernel changed since)") == 2 * len(GPUS)  # every benchmark


@needs_interpreter
def test_a_stale_footer_wraps_inside_the_figure(page, store_dir, monkeypatch):
    import matplotlib.pyplot as plt

    from triton_guide.benchmark import FOOTER_CHARS

    current = store.kernel_source(PAGE_SOURCE)
    changed = {"modules": {m: "0" * 64 for m in current["modules"]}, "sha256": "0" * 64}
    monkeypatch.setattr(store, "kernel_source", lambda source: changed)
    figure = recalled(page, store_dir).plot()
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    right_edges = [text.get_window_extent(renderer).x1 for text in figure.texts]
    footers = [text.get_text() for text in figure.texts]
    plt.close(figure)
    assert all(store.STALE in footer.replace("\n", " ") for footer in footers), footers
    # which files changed is printed with the sweep's text, not repeated in the figure
    assert not any("changed since" in footer for footer in footers), footers
    assert all(len(line) <= FOOTER_CHARS for f in footers for line in f.split("\n"))
    assert max(right_edges) <= figure.bbox.x1, (right_edges, figure.bbox.x1)


@needs_interpreter
def test_many_variants_get_a_panel_per_gpu_inside_the_figure():
    import matplotlib.pyplot as plt

    names = [f"variant {i}" for i in range(benchmark.OVERLAID_VARIANTS + 1)]
    runs = [benchmark.Run(gpu=gpu, slug=gpu.lower(), live=False, provenance="synthetic",
                          xs=XS, series={name: [float(j + 1)] * len(XS)
                                         for j, name in enumerate(names)},
                          unit="GB/s",
                          ceiling=benchmark.Ceiling("copy", "synthetic copy", 10.0, "GB/s"))
            for gpu in ("Synthetic A100", "Synthetic B200")]
    results = benchmark.Results("synthetic", label="n", xlabel="n", unit="GB/s", logx=True,
                                runs=runs)
    figure = results.plot()
    figure.canvas.draw()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())  # inches, all that is drawn
    width, height = figure.get_size_inches()
    panels = [(axes.get_title(), [line.get_label() for line in axes.get_lines()
                                  if not line.get_label().startswith("_")])
              for axes in figure.axes]
    plt.close(figure)
    assert not results.overlaid
    assert drawn.x0 >= 0 and drawn.y0 >= 0 and drawn.x1 <= width and drawn.y1 <= height, (
        drawn, width, height)
    assert [title for title, _ in panels] == [
        "Synthetic A100, ceiling 10 GB/s", "Synthetic B200, ceiling 10 GB/s"]
    assert [labels for _, labels in panels] == [
        [f"{gpu}: {name}" for name in names] + [f"{gpu}: ceiling, synthetic copy 10 GB/s"]
        for gpu in ("Synthetic A100", "Synthetic B200")]


@needs_interpreter
def test_a_page_that_sweeps_through_a_helper_has_benchmarks(tmp_path):
    page = tmp_path / "08_helper_sweep.py"
    page.write_text('"""A page that sweeps only through a helper."""\n'
                    "from triton_guide.benchmark import Benchmark, sweep_matmuls\n"
                    "bench = Benchmark()\n"
                    "results = sweep_matmuls(bench, 'products', [256], {})\n")
    stamp = Benchmark(page, results_dir=tmp_path / "empty").stamp()
    assert stamp.endswith(" No GPU timings recorded for this page yet (on a GPU, "
                          "`make bench PAGE=helper_sweep` records them).")
    page.write_text('"""A page with no benchmark."""\nresults = sorted([256])\n')
    assert "No GPU timings" not in Benchmark(page, results_dir=tmp_path / "empty").stamp()
