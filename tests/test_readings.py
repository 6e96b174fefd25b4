"""The one-line readings of a benchmark (triton_guide.benchmark.readings), on SYNTHETIC runs:
made-up numbers, nothing measured. The measurements that need a GPU (peak memory, a first
call's wall time) are checked only where CUDA is present; the cache switch is checked
everywhere."""

from __future__ import annotations

import math
import os

import pytest
import torch

from triton_guide import benchmark
from triton_guide.benchmark import Ceiling


def synthetic(series_by_gpu: dict[str, dict[str, list[float]]], xs, unit="GB/s",
              label="n") -> benchmark.Results:
    runs = [benchmark.Run(gpu=gpu, slug=gpu.lower().replace(" ", "-"), live=False,
                          provenance="synthetic", xs=list(xs), series=series, unit=unit,
                          ceiling=Ceiling(kind="copy", label="copy", value=100.0, unit=unit))
            for gpu, series in series_by_gpu.items()]
    return benchmark.Results("synthetic", label=label, xlabel=label, unit=unit, logx=True,
                             runs=runs)


def test_share_of_is_each_variant_over_the_reference_at_the_largest_x(capsys):
    results = synthetic({"Synthetic A100": {"step 1": [5.0, 30.0], "step 2": [9.0, 45.0],
                                            "cuBLAS": [10.0, 60.0]},
                         "Synthetic B200": {"step 1": [1.0, 20.0], "cuBLAS": [2.0, 80.0]}},
                        xs=[256, 8192])
    shares = benchmark.print_share_of(results, "cuBLAS")
    assert shares == {"Synthetic A100": {"step 1": 0.5, "step 2": 0.75},
                      "Synthetic B200": {"step 1": 0.25}}
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, n = 8,192, share of cuBLAS's GB/s: step 1 50%, step 2 75%",
        "Synthetic B200, n = 8,192, share of cuBLAS's GB/s: step 1 25%; step 2 not in this "
        "recording"]


def test_share_range_gives_each_variants_best_and_worst_share_and_where(capsys):
    results = synthetic({"Synthetic A100": {"4 warps": [30.0, 90.0, 80.0],
                                            "8 warps": [50.0, 50.0, 100.0],
                                            "cuBLAS": [100.0, 100.0, 100.0]}},
                        xs=[1, 2, 3], label="num_stages")
    found = benchmark.print_share_range(results, "cuBLAS")
    assert found == {"Synthetic A100": {"4 warps": {1: 0.3, 2: 0.9, 3: 0.8},
                                        "8 warps": {1: 0.5, 2: 0.5, 3: 1.0}}}
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100",
        "  4 warps                    best  90% of cuBLAS at num_stages 2, worst  30% at 1",
        "  8 warps                    best 100% of cuBLAS at num_stages 3, worst  50% at 1"]


def test_best_and_worst_count_the_readings_near_the_best(capsys):
    results = synthetic({"Synthetic A100": {"1 warps": [50.0, 96.0, 100.0],
                                            "8 warps": [10.0, 94.0, 99.0]}},
                        xs=[128, 1024, 4096], label="BLOCK_SIZE")
    found = benchmark.print_best_and_worst(results)
    assert found["Synthetic A100"] == ((100.0, "1 warps", 4096), (10.0, "8 warps", 128), 3)
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100: best 1 warps at BLOCK_SIZE 4096, 100 GB/s; worst 8 warps at "
        "BLOCK_SIZE 128, 10 (10.0x less); within 5% of the best: 3 of 6, at BLOCK_SIZE "
        "1024 to 4096")


def test_ratios_are_printed_at_every_x(capsys):
    results = synthetic({"Synthetic A100": {"rows": [30.0, 90.0], "columns": [10.0, 10.0]}},
                        xs=[1024, 8192])
    assert benchmark.print_ratios(results, "rows", "columns") == {
        "Synthetic A100": [3.0, 9.0]}
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100, rows / columns by n: 1,024: 3.00, 8,192: 9.00")


def test_ratio_range_leaves_out_refused_shapes_and_counts_those_at_parity(capsys):
    nan = float("nan")
    results = synthetic({"Synthetic A100": {"ours": [50.0, 80.0, 90.0],
                                            "flash": [100.0, 80.0, 60.0],
                                            "cuDNN": [nan, nan, nan]}},
                        xs=["B1 Nk4k", "B8 Nk4k", "B64 Nk4k"], label="shape")
    found = benchmark.print_ratio_range(results, "ours", ["flash", "cuDNN"], context="GPU time")
    assert found["Synthetic A100"]["flash"] == (0.5, 1.5, 2, 3)
    low, high, reach, counted = found["Synthetic A100"]["cuDNN"]
    assert (reach, counted) == (0, 0) and low != low and high != high  # nan: none left
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, GPU time, ours / flash 0.50-1.50x, lowest at B1 Nk4k; 1.0x or more "
        "at 2 of 3",
        "Synthetic A100, GPU time, cuDNN refused every shape"]


def test_host_bound_lists_the_x_where_the_call_took_over_twice_the_kernel(capsys):
    # GB/s over bytes per call: 1e3 bytes at 1 GB/s is 1 us.
    kernel = synthetic({"Synthetic A100": {"ours": [1.0, 1.0, 1.0]}}, xs=[1, 2, 3])
    called = synthetic({"Synthetic A100": {"ours": [0.25, 0.6, 1.0]}}, xs=[1, 2, 3])
    found = benchmark.print_host_bound(kernel, called, "ours", work=lambda x: 1e3)
    assert found == {"Synthetic A100": [(1, 4.0, 1.0)]}
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100: ours as called over 2x its GPU time at 1 of 3 values of n: 1 (4 us, "
        "1 on the GPU)")


def test_time_follows_work_from_the_first_x_at_twice_the_smallest_time(capsys):
    # GB/s with one byte of work per x: us per call = x / rate * 1e-3.
    results = synthetic({"Synthetic A100": {"sum": [1.0, 1.5, 2.0, 4.0],  # 1, 1.3, 2, 2 us
                                            "noisy": [0.25, 2.0, 2.0, 2.0],  # 4, 1, 2, 4 us
                                            "level": [1.0, 2.0, 4.0, 8.0]}},  # 1 us each
                        xs=[1000, 2000, 4000, 8000])
    found = benchmark.print_where_time_follows_work(results, ["sum", "noisy", "level"],
                                                    work=lambda x: x)
    # noisy: its 4 us at 1000 is over 1.5x the 1 us at 2000, so it is left out and the
    # smallest kept reading is 1 us at 2000, doubled at 4000.
    assert found == {"Synthetic A100": {"sum": 4000, "noisy": 4000, "level": None}}
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100, time per call first twice the smallest n's: sum at 4,000, noisy at "
        "4,000, level never; left out, slower than at a larger n: noisy at 1,000")


def test_ridge_points_divide_each_gpus_gemm_ceiling_by_its_copy_ceiling(capsys):
    class Recorded:  # stands in for a Benchmark: the ceilings of two GPUs, one incomplete
        def ceilings(self, kind):
            values = {"gemm_fp16": {"Synthetic A100": 300.0, "Synthetic B200": 2000.0},
                      "copy": {"Synthetic A100": 1500.0}}[kind]
            return {gpu: Ceiling(kind=kind, label=kind, value=value, unit="")
                    for gpu, value in values.items()}

    assert benchmark.print_ridge_points(Recorded()) == {"Synthetic A100": 200.0}
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100: 300 TFLOP/s over 1500 GB/s, a ridge point of 200 FLOP per byte: "
        "below it memory bounds a kernel")


def test_readings_print_named_x_values_as_they_are(capsys):
    results = synthetic({"Synthetic A100": {"ours": [30.0, 90.0], "theirs": [10.0, 100.0]}},
                        xs=["3000x4000x2000", "4096^3"], label="shape")
    assert benchmark.print_ratios(results, "ours", "theirs") == {"Synthetic A100": [3.0, 0.9]}
    assert benchmark.print_share_of(results, "theirs") == {"Synthetic A100": {"ours": 0.9}}
    assert benchmark.print_step_gains(results, ["theirs", "ours"]) == {
        "Synthetic A100": {"ours": 0.9}}
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, ours / theirs by shape: 3000x4000x2000: 3.00, 4096^3: 0.90",
        "Synthetic A100, shape = 4096^3, share of theirs's GB/s: ours 90%",
        "Synthetic A100, shape = 4096^3, each step over the one before: ours 0.90x"]


def test_in_units_divides_the_largest_x_by_its_size_and_notes_equal_gpus(capsys):
    peaks = {"torch": [3.0, 6.0], "fused": [1.0, 2.0], "in place": [0.0, 0.0]}
    results = synthetic({"Synthetic A100": peaks, "Synthetic B200": dict(peaks)},
                        xs=[1, 2], unit="GiB", label="rows")
    found = benchmark.print_in_units(results, "inputs", lambda rows: rows * 1.0)
    assert found["Synthetic B200"] == {"torch": 3.0, "fused": 1.0, "in place": 0.0}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Synthetic A100, rows = 2, in inputs: torch 3.0; fused 1.0; in place 0.0"
    assert lines[-1] == ("every GPU measured the same GiB: in the plot, one GPU's lines "
                         "hide the other's")


def test_readings_of_no_run_print_nothing(capsys):
    empty = benchmark.Results("none", label="n", xlabel="n", unit="GB/s", logx=True, runs=[])
    assert benchmark.print_share_of(empty, "torch") == {}
    assert benchmark.print_best_and_worst(empty) == {}
    assert benchmark.print_ratios(empty, "a", "b") == {}
    assert benchmark.print_in_units(empty, "x", lambda x: 1.0) == {}
    assert capsys.readouterr().out == ""


def test_on_cold_copies_prepares_enough_calls_to_overrun_l2():
    prepared = []
    calls = benchmark.on_cold_copies(lambda x: prepared.append(x) or (lambda: x),
                                     work=lambda x: 2**20)(7)
    assert len(calls) == benchmark.copies_for_cold_cache(2**20) == len(prepared)
    assert prepared == [7] * len(calls) and calls[0]() == 7


def test_host_time_times_the_prepared_call_with_host_us(monkeypatch):
    timed = []
    monkeypatch.setattr(benchmark.variants, "host_us",
                        lambda call: timed.append(call()) or 12.5)
    measure = benchmark.host_time(lambda x: lambda: x * 2)(21)
    assert timed == []  # nothing is timed until the measure is called
    assert measure() == 12.5 and timed == [42]


def test_empty_triton_cache_points_triton_elsewhere_and_restores_the_setting(monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/else")
    with benchmark.empty_triton_cache() as folder:
        assert os.environ["TRITON_CACHE_DIR"] == folder and os.listdir(folder) == []
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/else"
    monkeypatch.delenv("TRITON_CACHE_DIR")
    with benchmark.empty_triton_cache():
        pass
    assert "TRITON_CACHE_DIR" not in os.environ


@pytest.mark.skipif(not torch.cuda.is_available(), reason="peak memory needs a CUDA GPU")
def test_peak_memory_counts_what_the_call_allocates():
    measure = benchmark.peak_memory(
        lambda mib: lambda: torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda"))(64)
    assert measure() == pytest.approx(64 / 1024, rel=0.05)


def test_call_floors_take_the_longer_of_host_and_kernel_time(capsys):
    # n = 10: 2000 FLOPs at 1e-3 TFLOP/s is 2 us on the GPU; n = 100: 2e6 FLOPs, 2000 us.
    kernels = synthetic({"Synthetic A100": {"ours": [1e-3, 1e-3], "lib": [2e-3, 1e-3]}},
                        xs=[10, 100], unit="TFLOP/s")
    host = benchmark.Results("host", label="n", xlabel="n", unit="us per call", logx=True,
                             runs=[benchmark.Run(
                                 gpu="Synthetic A100", slug="synthetic-a100", live=False,
                                 provenance="", xs=[10, 100, 1000], unit="us per call",
                                 series={"ours, host": [50.0, 60.0, 70.0],
                                         "lib, host": [10.0, 10.0, 10.0]}, ceiling=None)])
    floors = benchmark.print_call_floors(host, kernels, ours=("ours, host", "ours"),
                                         theirs=("lib, host", "lib"), work=lambda n: 2 * n**3)
    assert floors["Synthetic A100"][10] == pytest.approx((50.0, 2.0, 50.0, 10.0))
    assert floors["Synthetic A100"][100] == pytest.approx((60.0, 2000.0, 2000.0, 2000.0))
    assert 1000 not in floors["Synthetic A100"]  # no GPU time at that size
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, ours, host:",
        "  n = 10: host 50 us, kernel 2.0 us; a call at least 50 us against lib, host's 10: "
        "0.20x its speed",
        "  n = 100: host 60 us, kernel 2000.0 us; a call at least 2000 us against lib, "
        "host's 2000: 1.00x its speed"]


def test_ratios_beside_a_counted_ratio_name_the_x_that_fall_below_it(capsys):
    results = synthetic({"Synthetic A100": {"fused": [20.0, 90.0, 50.0],
                                            "naive": [10.0, 20.0, 10.0]}}, xs=[128, 1024, 8192])
    assert benchmark.print_ratios(results, "fused", "naive", beside=4.0) == {
        "Synthetic A100": [2.0, 4.5, 5.0]}
    benchmark.print_ratios(results, "fused", "naive", beside=1.5)
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, fused / naive by n: 128: 2.00, 1,024: 4.50, 8,192: 5.00; "
        "below 4.0 at: 128",
        "Synthetic A100, fused / naive by n: 128: 2.00, 1,024: 4.50, 8,192: 5.00; "
        "below 1.5 at: none"]


def test_step_gains_set_each_step_over_the_one_before_at_the_largest_x(capsys):
    results = synthetic({"Synthetic A100": {"step 1": [1.0, 10.0], "step 2": [2.0, 40.0],
                                            "step 3": [3.0, 60.0], "library": [9.0, 90.0]},
                         "Synthetic B200": {"step 1": [1.0, 10.0], "step 3": [3.0, 30.0]}},
                        xs=[256, 4096], unit="TFLOP/s", label="N")
    gains = benchmark.print_step_gains(results, ["step 1", "step 2", "step 3"])
    assert gains == {"Synthetic A100": {"step 2": 4.0, "step 3": 1.5},
                     "Synthetic B200": {"step 3": 3.0}}
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, N = 4,096, each step over the one before: step 2 4.00x, "
        "step 3 1.50x",
        "Synthetic B200, N = 4,096, each step over the one before: step 3 3.00x; "
        "step 2 not in this recording"]


def test_memory_cap_says_what_share_of_the_reads_came_from_cache(capsys):
    # 1e12 FLOPs per call; 2 GB read. At a copy rate of 1000 GB/s the bytes take 2 ms, which
    # caps the rate at 1e12 FLOPs / 2 ms = 500 TFLOP/s.
    results = synthetic({"Synthetic A100": {"one pass": [100.0, 800.0]},
                         "Synthetic B200": {"one pass": [100.0, 400.0]},
                         "Synthetic C300": {"one pass": [100.0, 900.0]}},
                        xs=[1, 2], unit="TFLOP/s", label="N")
    copy = {gpu: Ceiling(kind="copy", label="copy", value=1000.0, unit="GB/s")
            for gpu in ("Synthetic A100", "Synthetic B200")}  # none for C300
    found = benchmark.print_memory_cap(results, "one pass", lambda n: 2e9, copy,
                                       work=lambda n: 1e12)
    assert found["Synthetic A100"] == pytest.approx((500.0, 800.0))
    assert found["Synthetic B200"] == pytest.approx((500.0, 400.0))
    assert "Synthetic C300" not in found
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100, one pass at N = 2: 2.0 GB at 1,000 GB/s allow 500 TFLOP/s, "
        "measured 800: at least 38% of the reads came from L2",
        "Synthetic B200, one pass at N = 2: 2.0 GB at 1,000 GB/s allow 500 TFLOP/s, "
        "measured 400, within what memory alone allows"]


class _Ceilings:
    """Stands in for a Benchmark: ceilings(kind) -> {gpu: Ceiling}."""

    def __init__(self, values: dict[str, dict[str, float]]):
        self.values = values

    def ceilings(self, kind):
        unit = benchmark.CEILING_UNITS[kind]
        return {gpu: Ceiling(kind=kind, label=kind, value=value, unit=unit)
                for gpu, value in self.values[kind].items()}


def test_at_ceilings_turns_bytes_and_flops_into_milliseconds_on_gpus_with_both(capsys):
    bench = _Ceilings({"copy": {"Synthetic A100": 2000.0, "Synthetic B200": 4000.0},
                       "gemm_fp16": {"Synthetic A100": 500.0}})
    found = benchmark.print_at_ceilings(bench, {"the traffic": (8e9, "copy"),
                                                "the math": (1e12, "gemm_fp16")})
    # 8 GB at 2000 GB/s: 4 ms; 1 TFLOP at 500 TFLOP/s: 2 ms. B200 has no GEMM ceiling.
    assert found == {"Synthetic A100": pytest.approx({"the traffic": 4.0, "the math": 2.0})}
    assert capsys.readouterr().out.strip() == (
        "Synthetic A100 (2,000 GB/s, 500 TFLOP/s): the traffic 4 ms, the math 2 ms; "
        "the longest: the traffic, 2.0x the math")


def test_host_and_gpu_set_both_times_beside_the_sweeps_time_per_call(capsys):
    # 1e6 bytes per call at n = 10: at 100 GB/s (the sweep's ceiling) 10 us; the sweep's
    # rates 50 and 20 GB/s are 20 and 50 us per call.
    sweep = synthetic({"Synthetic A100": {"ours": [50.0], "theirs": [20.0]}}, xs=[10],
                      label="N")
    times = benchmark.Results("split", label="N", xlabel="N", unit="us per call", logx=True,
                              runs=[benchmark.Run(
                                  gpu="Synthetic A100", slug="synthetic-a100", live=False,
                                  provenance="", xs=[10, 20], unit="us per call",
                                  series={"ours, host": [40.0, 41.0],
                                          "theirs, host": [8.0, 9.0],
                                          "ours, GPU alone": [3.0, 6.0],
                                          "theirs, GPU alone": [4.0, 8.0]}, ceiling=None)])
    found = benchmark.print_host_and_gpu(times, sweep, ["ours", "theirs"],
                                         work=lambda n: n * 1e5)
    assert found["Synthetic A100"][10]["ours"] == pytest.approx((40.0, 3.0, 20.0))
    assert found["Synthetic A100"][10]["theirs"] == pytest.approx((8.0, 4.0, 50.0))
    assert math.isnan(found["Synthetic A100"][20]["ours"][2])  # the sweep has no n = 20
    clearing = benchmark.DO_BENCH_CLEARING_BYTES / 100.0 * 1e-3
    assert capsys.readouterr().out.splitlines() == [
        f"Synthetic A100, ours / theirs, us per call (do_bench's clearing writes 256 MiB: "
        f"{clearing:.0f} us at the copy rate):",
        "  N = 10 (1.0 MB, 10.0 us at the copy rate): host 40.0 / 8.0; GPU alone 3.0 / 4.0; "
        "in the sweep 20.0 / 50.0",
        "  N = 20 (2.0 MB, 20.0 us at the copy rate): host 41.0 / 9.0; GPU alone 6.0 / 8.0"]


def test_new_readings_of_no_run_print_nothing(capsys):
    empty = benchmark.Results("none", label="n", xlabel="n", unit="GB/s", logx=True, runs=[])
    assert benchmark.print_step_gains(empty, ["a", "b"]) == {}
    assert benchmark.print_memory_cap(empty, "a", lambda x: 1.0, {}, work=lambda x: 1.0) == {}
    assert benchmark.print_host_and_gpu(empty, empty, ["a"], work=lambda x: 1.0) == {}
    assert benchmark.print_at_ceilings(_Ceilings({"copy": {}}), {"bytes": (1.0, "copy")}) == {}
    assert capsys.readouterr().out == ""


# -- variants made from a page's function ---------------------------------------------


def test_random_inputs_gives_fresh_tensors_of_each_shape_and_warms_once():
    seen = []
    prepare = benchmark.random_inputs(lambda a, b: seen.append((a, b)) or a.sum(),
                                      lambda n: (3, n), lambda n: (n,), dtype=torch.float64,
                                      warm=True)
    call = prepare(5)
    assert len(seen) == 1  # the warm-up call
    a, b = seen[0]
    assert a.shape == (3, 5) and b.shape == (5,) and a.dtype == b.dtype == torch.float64
    assert call() == a.sum() and len(seen) == 2 and seen[1][0] is a  # the same inputs
    prepare(5)
    assert not torch.equal(seen[2][0], a)  # preparing again draws fresh inputs
    calls = []
    cold = benchmark.random_inputs(calls.append, lambda n: (n,))(4)
    assert calls == []  # not warmed: nothing is called until the callable is
    cold()
    assert len(calls) == 1 and calls[0].shape == (4,) and calls[0].dtype == torch.float32


def test_host_and_gpu_time_names_host_variants_first_and_times_through_the_timers(
        monkeypatch):
    from triton_guide.benchmark import variants

    monkeypatch.setattr(variants, "host_us", lambda fn: fn() + 0.5)
    monkeypatch.setattr(variants, "gpu_ms", lambda calls: len(calls) * 1e-3)
    prepares = {"ours": lambda x: (lambda: x), "theirs": lambda x: (lambda: 2 * x)}
    measures = benchmark.host_and_gpu_time(prepares, work=lambda x: 2**20)
    assert list(measures) == ["ours, host", "theirs, host", "ours, GPU alone",
                              "theirs, GPU alone"]
    assert measures["theirs, host"](3)() == 6.5  # host_us of prepare(3)'s call
    # gpu_ms over one call per cold copy, in microseconds
    assert measures["ours, GPU alone"](3)() == pytest.approx(
        benchmark.copies_for_cold_cache(2**20))


def test_distinct_results_counts_the_different_results_of_repeated_calls():
    answers = iter([1.0, 2.0, 1.0, 3.0, 1.0])
    count = benchmark.distinct_results(lambda x: lambda: torch.tensor(next(answers) * x), 5)(2)
    assert count() == 3.0  # 2, 4, 2, 6, 2: three different sums
    same = benchmark.distinct_results(lambda x: lambda: torch.tensor([x, 1.0]), 4)(7)
    assert same() == 1.0
    # whole results are compared, not their elements one by one
    rows = iter([torch.tensor([1.0, 2.0]), torch.tensor([2.0, 1.0])])
    assert benchmark.distinct_results(lambda x: lambda: next(rows), 2)(0)() == 2.0


def test_same_bytes_copy_moves_the_bytes_of_the_work_half_read_half_written():
    call = benchmark.same_bytes_copy(lambda n: 3 * n * 2, dtype=torch.bfloat16)(1000)
    source = call.args[0]
    target = call()  # copy_ returns the tensor it wrote
    assert source.dtype == target.dtype == torch.bfloat16
    assert 2 * source.numel() * source.element_size() == 3 * 1000 * 2
    assert torch.equal(target, source) and target.data_ptr() != source.data_ptr()


def test_memory_bound_sweep_rates_the_work_in_gb_s_beside_a_same_bytes_copy(monkeypatch):
    class Bench:  # takes what the helper hands to Benchmark.sweep
        def sweep(self, title, xs, variants, rate, **options):
            self.title, self.xs, self.variants, self.rate, self.options = (
                title, xs, variants, rate, options)
            return "results"

    def work(n):
        return 4 * n

    bench = Bench()
    ours = lambda n: (lambda: n)  # noqa: E731
    assert benchmark.memory_bound_sweep(bench, "t", [8, 16], {"ours": ours}, work,
                                        label="n", xlabel="elements") == "results"
    assert list(bench.variants) == ["ours"] and bench.variants["ours"] is ours
    assert bench.rate(2**20, 1.0) == benchmark.gb_per_s(4 * 2**20, 1.0)
    assert bench.options == dict(label="n", unit="GB/s", ceiling="copy", xlabel="elements",
                                 logx=True, gpu_time=False)
    benchmark.memory_bound_sweep(bench, "t", [8], {"ours": ours}, work, label="n",
                                 copy_dtype=torch.float16)
    assert list(bench.variants) == ["ours", benchmark.SAME_BYTES_COPY]
    source = bench.variants[benchmark.SAME_BYTES_COPY](1000).args[0]
    assert source.dtype == torch.float16 and 2 * source.numel() * 2 == 4000
    benchmark.memory_bound_sweep(bench, "t", [8], {"ours": ours}, work, label="n",
                                 gpu_time=True)
    assert bench.options["gpu_time"] is True
    calls = bench.variants["ours"](2**20)  # cold copies: enough calls to overrun L2
    assert len(calls) == benchmark.copies_for_cold_cache(4 * 2**20) and calls[0]() == 2**20


def test_random_inputs_each_gives_each_function_its_own_inputs_of_the_same_shapes():
    seen = {"ours": [], "theirs": []}
    fns = {name: (lambda *tensors, name=name: seen[name].append(tensors))
           for name in ("ours", "theirs")}
    variants = benchmark.random_inputs_each(fns, int, lambda n: (2, n), dtype=torch.float64)
    assert list(variants) == ["ours", "theirs"]
    for name, prepare in variants.items():
        prepare(7)()
    (a, b), = seen["ours"]
    (c, d), = seen["theirs"]
    assert a.shape == c.shape == (7,) and b.shape == d.shape == (2, 7)  # int: a vector
    assert a.dtype == d.dtype == torch.float64
    assert not torch.equal(a, c)  # each variant draws its own tensors


class _Sweeps:
    """Stands in for a Benchmark: sweep returns the given results and keeps its arguments;
    ceilings returns the given copy ceilings by GPU."""

    def __init__(self, results, copy=None):
        self.results, self.copy, self.calls = results, copy or {}, []

    def sweep(self, title, xs, variants, rate, **options):
        self.calls.append((title, list(xs), variants, rate, options))
        return self.results

    def ceilings(self, kind):
        assert kind == "copy"
        return {gpu: Ceiling(kind="copy", label="copy", value=value, unit="GB/s")
                for gpu, value in self.copy.items()}


def test_sweep_working_sets_reads_hbm_l2_and_the_smallest_set_off_each_gpu(capsys):
    xs = [0.25, 1.0, 4.0, 8.0, 16.0, 64.0, 256.0]
    results = synthetic({"Synthetic A100": {"read": [900.0, 700.0, 500.0, 400.0, 300.0,
                                                     120.0, 110.0]},
                         "Synthetic B200": {"read": [800.0, 600.0, 450.0, 350.0, 250.0,
                                                     200.0, 150.0]}}, xs=xs, label="MiB")
    bench = _Sweeps(results)
    sizes = {"Synthetic A100": {"L2 cache (MiB)": 32.0}}  # no sizes of the B200
    read = []
    levels = benchmark.sweep_working_sets(bench, "levels", xs, lambda data, p: read.append(
        (data.numel(), p)), lambda mib: int(1024 // mib), sizes)
    assert levels is results
    title, swept, variants, rate, options = bench.calls[0]
    assert (title, swept, list(variants)) == ("levels", xs, ["read"])
    assert options["ceiling"] == "copy" and options["unit"] == "GB/s"
    variants["read"](0.25)()  # 0.25 MiB of float32, read 4096 times
    assert read == [(2**16, 4096)]
    assert rate(1.0, 1.0) == pytest.approx(benchmark.gb_per_s(2**20 * 1024, 1.0))
    # A100: sets of 4 to 16 MiB (half its L2) read 500, 400, 300: the median 400 over HBM's
    # 110 at 256 MiB; without the B200's L2 size, no L2 rate is read off it.
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100: 256 MiB (from HBM) 110 GB/s, 110% of the copy; 4 MiB to L2/2 (from "
        "L2): 400 GB/s, 3.6x HBM; smallest set 900 GB/s",
        "Synthetic B200: 256 MiB (from HBM) 150 GB/s, 150% of the copy"]


def test_place_on_roofline_sweeps_the_named_kernels_and_prints_in_the_tables_precision(
        capsys):
    from triton_guide.traffic import Cost

    costs = {"stream": Cost(flops=1e9, bytes=1e10), "product": Cost(flops=1e12, bytes=1e9)}
    runs = [benchmark.Run(gpu="Synthetic A100", slug="synthetic-a100", live=False,
                          provenance="synthetic", xs=list(costs),
                          series={"achieved": [0.25, 150.0]}, unit="TFLOP/s",
                          ceiling=Ceiling(kind="gemm_fp16", label="gemm", value=300.0,
                                          unit="TFLOP/s"))]
    results = benchmark.Results("kernels", label="kernel", xlabel="kernel", unit="TFLOP/s",
                                logx=False, runs=runs)
    bench = _Sweeps(results, copy={"Synthetic A100": 2500.0})
    assert benchmark.place_on_roofline(bench, "kernels", costs, lambda name: None) is results
    title, swept, variants, rate, options = bench.calls[0]
    assert (title, swept, list(variants)) == ("kernels", ["stream", "product"], ["achieved"])
    assert options["ceiling"] == "gemm_fp16" and options["logx"] is False
    assert rate("product", 1.0) == pytest.approx(benchmark.tflop_per_s(1e12, 1.0))
    # 0.25 in the table's one decimal (the column's largest is 150): 0.2, as the table says.
    # Roofs: 0.1 FLOP/byte x 2500 GB/s = 0.25 TFLOP/s; the product's, 300 (the flat part).
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100: copy 2,500 GB/s, fp16 GEMM 300 TFLOP/s: ridge point 120 FLOP/byte",
        "  stream                              0.2 TFLOP/s,  100% of its roof",
        "  product                           150.0 TFLOP/s,   50% of its roof"]


def test_the_roofline_legend_shows_each_kernels_mark_at_the_foot_of_its_line():
    from triton_guide.traffic import Cost

    costs = {"stream": Cost(flops=1e9, bytes=1e10), "product": Cost(flops=1e12, bytes=1e9)}
    empty = benchmark.Results("kernels", label="kernel", xlabel="kernel", unit="TFLOP/s",
                              logx=False, runs=[])
    figure = benchmark.roofline(empty, costs, {})
    axes = figure.axes[0]
    feet = [line for line in axes.lines if line.get_marker() not in ("None", None, "")]
    legend = axes.get_legend()
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == ["each kernel's marker;\ndotted: its intensity", "stream", "product"]
    assert len(feet) == len(costs)
    for foot, entry in zip(feet, legend.legend_handles[1:]):
        # the same marker, hollow, on the same dotted line as at the foot of the vertical
        assert entry.get_marker() == foot.get_marker()
        assert entry.get_markerfacecolor() == foot.get_markerfacecolor() == "white"
        assert entry.get_linestyle() == ":"


def test_random_inputs_by_setting_passes_x_as_the_setting_on_inputs_of_fixed_shapes():
    seen = {"ours": [], "theirs": []}
    fns = {"ours": lambda a, b, stages: seen["ours"].append((a, b, stages)) or stages,
           "theirs": lambda a, b, stages: seen["theirs"].append((a, b, stages)) or 0}
    variants = benchmark.random_inputs_by_setting(fns, "stages", 5, (2, 3),
                                                  dtype=torch.float64, warm=True)
    assert list(variants) == ["ours", "theirs"]
    call = variants["ours"](4)
    assert len(seen["ours"]) == 1  # the warm-up call, before any timing
    assert call() == 4 and len(seen["ours"]) == 2
    a, b, stages = seen["ours"][1]
    assert stages == 4 and a is seen["ours"][0][0]  # x as the keyword, the same inputs
    assert a.shape == (5,) and b.shape == (2, 3)  # the shapes do not follow x
    assert a.dtype == b.dtype == torch.float64
    variants["ours"](1)()
    assert seen["ours"][-1][2] == 1 and seen["ours"][-1][0].shape == (5,)
    assert not torch.equal(seen["ours"][-1][0], a)  # each x draws fresh inputs
    cold = benchmark.random_inputs_by_setting(fns, "stages", 3, 3)["theirs"](2)
    assert seen["theirs"] == []  # not warmed: nothing runs until the callable is called
    cold()
    assert seen["theirs"][0][0].dtype == torch.float32 and seen["theirs"][0][2] == 2


def test_compute_bound_sweep_rates_the_flops_in_tflop_s_and_times_cold_copies_on_the_gpu():
    class Bench:  # takes what the helper hands to Benchmark.sweep
        def sweep(self, title, xs, variants, rate, **options):
            self.title, self.xs, self.variants, self.rate, self.options = (
                title, xs, variants, rate, options)
            return "results"

    bench = Bench()
    ours = lambda x: (lambda: x)  # noqa: E731
    assert benchmark.compute_bound_sweep(bench, "t", [1, 2], {"ours": ours}, lambda x: 2e12,
                                         label="num_stages", logx=False) == "results"
    assert bench.title == "t" and bench.xs == [1, 2] and bench.variants["ours"] is ours
    assert bench.rate(1, 4.0) == benchmark.tflop_per_s(2e12, 4.0) == pytest.approx(500.0)
    assert bench.options == dict(label="num_stages", unit="TFLOP/s", ceiling="gemm_fp16",
                                 xlabel=None, logx=False, gpu_time=False)
    benchmark.compute_bound_sweep(bench, "t", [3], {"ours": ours}, lambda x: 1.0,
                                  label="n", ceiling="gemm_bf16", cold_bytes=lambda x: 2**20)
    assert bench.options["gpu_time"] is True and bench.options["ceiling"] == "gemm_bf16"
    calls = bench.variants["ours"](3)  # cold copies: enough calls to overrun L2
    assert len(calls) == benchmark.copies_for_cold_cache(2**20) and calls[0]() == 3


def test_share_and_gain_read_the_best_stage_its_gain_over_the_first_and_one_step(capsys):
    results = synthetic({"Synthetic A100": {"4 warps": [30.0, 90.0, 80.0],
                                            "8 warps": [50.0, 50.0, 110.0],
                                            "cuBLAS": [100.0, 100.0, 110.0]}},
                        xs=[1, 2, 3], label="num_stages")
    found = benchmark.print_share_and_gain(results, "cuBLAS", step_to=3)
    assert found == {"Synthetic A100": {"4 warps": {1: 0.3, 2: 0.9, 3: 80.0 / 110.0},
                                        "8 warps": {1: 0.5, 2: 0.5, 3: 1.0}}}
    # gains are ratios of shares: 8 warps' step from 2 to 3 is 1.0 / 0.5, not 110 / 50
    assert capsys.readouterr().out.splitlines() == [
        "Synthetic A100",
        "  4 warps                    best  90% of cuBLAS at num_stages 2 (3.00x its share at "
        "1), worst  30% at 1; from 2 to 3: 0.81x",
        "  8 warps                    best 100% of cuBLAS at num_stages 3 (2.00x its share at "
        "1), worst  50% at 1; from 2 to 3: 2.00x"]
    benchmark.print_share_and_gain(results, "cuBLAS", step_to=1)  # no x before the first
    assert "from" not in capsys.readouterr().out


def test_a_column_of_whole_numbers_prints_without_decimals():
    from triton_guide.benchmark.tables import _decimals

    assert _decimals([1.0, 19.0, float("nan")]) == 0  # counts: "1 | 19", not "1.00 | 19.0"
    assert _decimals([1.0, 19.5]) == 1
    assert _decimals([0.25, 0.5]) == 3  # three significant digits of the largest
    assert _decimals([float("nan")]) == 2  # nothing to go by


def test_matmul_variant_draws_each_shape_and_layout_and_warms_once():
    seen = []
    prepare = benchmark.matmul_variant(lambda a, b: seen.append((a, b)) or a @ b,
                                       lambda x: (x, 2 * x, 3), b_by_columns=True)
    call = prepare(4)
    assert len(seen) == 1  # the warm-up call, before anything is timed
    a, b = seen[0]
    assert a.shape == (4, 3) and b.shape == (3, 8) and a.dtype == b.dtype == torch.float16
    assert b.stride() == (1, 3)  # stored by columns: a transposed view of an 8 x 3 tensor
    call()
    assert len(seen) == 2 and seen[1][0] is a and seen[1][1] is b  # the same inputs
    square = benchmark.matmul_variant(lambda a, b: seen.append((a, b)), dtype=torch.bfloat16)
    square(5)
    a, b = seen[-1]
    assert a.shape == b.shape == (5, 5) and b.stride() == (5, 1) and b.dtype == torch.bfloat16


class _SweepArguments:
    """Stands in for a Benchmark: sweep(...) returns what it was given."""

    def sweep(self, title, xs, variants, rate, **options):
        return {"title": title, "xs": xs, "variants": variants, "rate": rate, **options}


def test_sweep_matmuls_rates_two_m_n_k_flops_under_the_dtypes_ceiling(monkeypatch):
    swept = benchmark.sweep_matmuls(_SweepArguments(), "square", [256], {"ours": torch.matmul})
    assert swept["unit"] == "TFLOP/s" and swept["ceiling"] == "gemm_fp16"
    assert swept["xlabel"] == "n (n x n x n, float16)" and swept["label"] == "n"
    assert not swept["gpu_time"] and swept["logx"]
    # 2 * 1000^3 FLOPs in 2 ms: 1 TFLOP/s
    assert swept["rate"](1000, 2.0) == pytest.approx(1.0)
    call = swept["variants"]["ours"](8)  # a prepared call, not a list of them
    assert callable(call) and call().shape == (8, 8)
    shapes = {"ragged": (2000, 3000, 1000)}
    swept = benchmark.sweep_matmuls(_SweepArguments(), "ragged", list(shapes),
                                    {"ours": torch.matmul}, shape=shapes.get,
                                    dtype=torch.bfloat16, gpu_time=True, label="M x N x K",
                                    logx=False)
    assert swept["ceiling"] == "gemm_bf16" and swept["xlabel"] == "M x N x K (bfloat16)"
    assert swept["gpu_time"] and not swept["logx"]
    assert swept["rate"]("ragged", 12.0) == pytest.approx(1.0)  # 1.2e10 FLOPs in 12 ms
    asked, seen = [], []
    monkeypatch.setattr(benchmark.variants, "copies_for_cold_cache",
                        lambda nbytes: asked.append(nbytes) or 3)
    shapes = {"small": (5, 6, 7)}
    cold = benchmark.sweep_matmuls(_SweepArguments(), "cold", ["small"],
                                   {"ours": lambda a, b: seen.append(a) or a @ b},
                                   shape=shapes.get, dtype=torch.bfloat16, gpu_time=True)
    calls = cold["variants"]["ours"]("small")  # GPU time: a call per cold copy
    assert asked == [(5 * 7 + 7 * 6) * 2]  # the bytes of a and b, bfloat16
    assert len(calls) == 3 and len({a.data_ptr() for a in seen}) == 3  # each its own inputs
    assert calls[1]().shape == (5, 6) and seen[-1] is seen[1]
    with pytest.raises(ValueError, match="dtype=torch.float32"):
        benchmark.sweep_matmuls(_SweepArguments(), "fp32", [8], {}, dtype=torch.float32)


def test_gain_against_spread_sets_the_change_beside_the_gap_of_the_same_code(capsys):
    results = synthetic({"Synthetic A100": {"split": [590.0, 600.0], "one": [500.0, 606.0],
                                            "cuBLAS": [630.0, 630.0]},
                         "Synthetic B200": {"split": [505.0, 600.0], "one": [500.0, 570.0]},
                         "Synthetic L4": {"split": [10.0], "one": [9.0]}},
                        xs=[3072, 4096], unit="TFLOP/s")
    results.runs[2].xs = [3072]  # a recording without the x of the same code
    found = benchmark.print_gain_against_spread(results, "split", "one", 3072, 4096,
                                                context="the last wave", bullet=True)
    assert found == {"Synthetic A100": pytest.approx((0.18, -0.0099), abs=1e-4),
                     "Synthetic B200": pytest.approx((0.01, 600 / 570 - 1))}
    assert capsys.readouterr().out.splitlines() == [
        "* Synthetic A100, the last wave: split over one +18.0% at n = 3,072, larger than the "
        "-1.0% between two timings of the same code at n = 4,096",
        "* Synthetic B200, the last wave: split over one +1.0% at n = 3,072, within the "
        "+5.3% between two timings of the same code at n = 4,096",
        "* Synthetic L4, the last wave: split and one at n = 3,072 and 4,096 not all in this "
        "recording"]
    empty = benchmark.Results("none", label="n", xlabel="n", unit="GB/s", logx=True, runs=[])
    assert benchmark.print_gain_against_spread(empty, "a", "b", 1, 2) == {}


def test_a_ceiling_legend_shared_by_gpus_keeps_only_what_they_share():
    from triton_guide.benchmark.ceilings import Ceiling
    from triton_guide.benchmark.figures import shared_ceiling_label

    h100 = Ceiling("copy", "copy of 1 GiB; median of 9 recorded runs, 2026-11-25", 3004.0, "GB/s")
    h200 = Ceiling("copy", "copy of 1 GiB; median of 8 recorded runs, 2026-11-26", 4250.0, "GB/s")
    assert shared_ceiling_label([h100, h200]) == "copy of 1 GiB"  # not the H100's runs alone
    assert shared_ceiling_label([h100]) == h100.label
    assert shared_ceiling_label([h100, h100]) == h100.label
