"""Timing kernels on a GPU, recording the timings, and drawing them; shared by the example
pages and ``benchmarks/report.py``. One module per job, every public name importable from
here: :mod:`~triton_guide.benchmark.timing` (timers and rates, a first call's wall time),
:mod:`~triton_guide.benchmark.ceilings`, :mod:`~triton_guide.benchmark.figures` (layout),
:mod:`~triton_guide.benchmark.roofline`, :mod:`~triton_guide.benchmark.tables`,
:mod:`~triton_guide.benchmark.pictures` (which program owns which elements or tiles),
:mod:`~triton_guide.benchmark.device` (each GPU's sizes),
:mod:`~triton_guide.benchmark.runs` (one benchmark's numbers per GPU),
:mod:`~triton_guide.benchmark.readings` (one-line readings of them for a page's prose)
and :mod:`~triton_guide.benchmark.host_readings` (the same for host time beside GPU time),
:mod:`~triton_guide.benchmark.variants` (sweep variants on random inputs or cold copies of
them, a call's host and GPU time apart, its peak memory; sweeps of memory-bound and
compute-bound calls), :mod:`~triton_guide.benchmark.sdpa` (attention against PyTorch's
SDPA backends) and :mod:`~triton_guide.benchmark.recording` (a page's benchmarks, live,
recorded and recalled).

A page's timing is, by default, the median of many runs from ``triton.testing.do_bench``
(:func:`median_ms`), which warms up first, times with CUDA events and flushes the L2 cache
before each run: one call as a program makes it, host included. :func:`gpu_ms`, which a
sweep with ``gpu_time=True`` (the matmul page's) and ``benchmarks/report.py`` use, leaves
the host out, as :func:`queued_ms` does for calls that a CUDA graph does not capture as
they are; :func:`host_us` measures the host's time alone. Under the interpreter nothing is
timed: a kernel's run time there measures numpy on the CPU.

**How a page benchmarks, records and recalls.** A page makes one :class:`Benchmark` in its first cell and prints its stamp, which says
where the page's outputs come from (live GPU, interpreter, which recordings)::

    from triton_guide.benchmark import Benchmark, gb_per_s

    bench = Benchmark()  # finds the page from sys.argv[0]; or Benchmark("path/to/page.py")
    print(bench.stamp())

Each benchmark is one :meth:`Benchmark.sweep`: a title (unique on the page, it names the
benchmark in the store), the x values, the variants, a rate, the unit of that rate and the
ceiling that bounds it (``"copy"`` for memory-bound kernels, ``"gemm_fp16"`` or
``"gemm_bf16"`` for compute-bound ones)::

    results = bench.sweep("vector add", sizes, {"triton_guide": ours, "torch": torch_add},
                          lambda n, ms: gb_per_s(12 * n, ms), label="n", unit="GB/s",
                          ceiling="copy", xlabel="elements (float32)")
    results.plot()                                    # every GPU, with its ceiling
    results.summary(ratios=[("triton_guide", "torch")])  # one column per GPU
    for run in results:                               # numbers for the prose
        print(f"{run.gpu}: {run.fraction_of_ceiling('triton_guide'):.0%} of the ceiling")

A number that is not a rate under a roof (peak memory, the wall time of a first call that
compiles) is one :meth:`Benchmark.measure`: each variant returns a callable that measures
once and returns the value in ``unit``; it is recorded and recalled the same way, without a
ceiling::

    peak = bench.measure("peak memory", rows, {"torch": torch_peak, "ours": our_peak},
                         label="rows", unit="GiB")

On a GPU, ``sweep`` times the variants now (and, with ``TRITON_GUIDE_RECORD=1``, as
``make bench`` sets it, writes them to ``results/<gpu>/<page>.json``); recordings of other
GPUs are drawn beside them. Without a GPU it times nothing: it returns the recordings of
every GPU, each labelled with its GPU, versions, date and commit, and flagged as stale when
the page's kernel source changed since (see :mod:`triton_guide.results`). With no
recording it says so in one line and returns an empty ``results``: ``plot`` and
``summary`` then do nothing and ``for run in results`` does not loop, so a page needs no
``if``. ``TRITON_GUIDE_TIMINGS=recorded`` makes a GPU build draw from the store too
(the site workflow does that after ``make bench``, so nothing is timed twice). A page split
out of another keeps showing the benchmarks recorded under the old page's key with
``Benchmark(recordings_from="matmul")``, for each GPU it has no recording of its own for.
"""

from .ceilings import (CEILING_UNITS, COPY_ELEMENTS, GEMM_SIZE, Ceiling, measure_ceiling)
from .device import DEVICE_SIZES, measure_device_sizes, sweep_working_sets
from .figures import (AXES_HEIGHT, FOOTER_CHARS, GPU_COLOURS, LEGEND_HANDLE_LENGTH, LINESTYLES,
                      MARKERS, OVERLAID_VARIANTS, SMALL_TEXT, WIDTH, coinciding, gpu_colour,
                      mark_each_gpu)
from .host_readings import print_call_floors, print_host_and_gpu, print_host_bound
from .pictures import (draw_cells, draw_element_owners, draw_key_masks, draw_program_order,
                       draw_tile_mask, draw_tile_owners, element_owners, tile_owners)
from .readings import (print_at_ceilings, print_best_and_worst, print_gain_against_spread,
                       print_in_units, print_memory_cap, print_ratio_range, print_ratios,
                       print_ridge_points, print_share_and_gain, print_share_of,
                       print_share_range, print_step_gains, print_where_time_follows_work)
from .recording import NO_RECORDING_TO_INTERPRET, Benchmark
from .roofline import place_on_roofline, roofline
from .runs import Results, Run
from .sdpa import BACKWARD_FLOPS_OVER_FORWARD, SDPA_BACKENDS, attention_sweep, sdpa_backends
from .tables import TABLE_WIDTH
from .timing import (COLD_BYTES, DO_BENCH_CLEARING_BYTES, HOST_TIMED_ROUNDS, NO_TIMINGS,
                     OUT_OF_LINE, WARMUP_S, calls_on, cold_matmul_inputs,
                     copies_for_cold_cache, gb_per_s, gpu_ms, host_us, matmul_tflop_per_s,
                     empty_triton_cache, first_call_ms, median_ms, out_of_line, queued_ms,
                     tflop_per_s, us_per_call)
from .variants import (GEMM_CEILINGS, SAME_BYTES_COPY, compute_bound_sweep, distinct_results,
                       gpu_time, host_and_gpu_time, host_time, matmul_variant,
                       memory_bound_sweep, on_cold_copies, peak_memory, random_inputs,
                       random_inputs_backward, random_inputs_by_setting, random_inputs_each,
                       same_bytes_copy, sweep_matmuls)

__all__ = [
    # timing
    "median_ms", "gpu_ms", "host_us", "queued_ms", "copies_for_cold_cache",
    "cold_matmul_inputs", "calls_on", "matmul_tflop_per_s", "gb_per_s", "tflop_per_s",
    "us_per_call", "out_of_line", "DO_BENCH_CLEARING_BYTES", "COLD_BYTES", "WARMUP_S",
    "HOST_TIMED_ROUNDS", "OUT_OF_LINE", "NO_TIMINGS",
    # ceilings
    "Ceiling", "measure_ceiling", "CEILING_UNITS", "COPY_ELEMENTS", "GEMM_SIZE",
    # figures and tables
    "LINESTYLES", "MARKERS", "LEGEND_HANDLE_LENGTH", "OVERLAID_VARIANTS", "SMALL_TEXT",
    "WIDTH", "AXES_HEIGHT", "FOOTER_CHARS", "TABLE_WIDTH", "GPU_COLOURS", "gpu_colour",
    "coinciding", "mark_each_gpu",
    # teaching pictures: which program owns which elements or tiles
    "element_owners", "tile_owners", "draw_cells", "draw_element_owners", "draw_tile_owners",
    "draw_program_order", "draw_tile_mask",
    # a benchmark's numbers, a page's benchmarks
    "Run", "Results", "Benchmark", "NO_RECORDING_TO_INTERPRET", "roofline",
    "measure_device_sizes", "DEVICE_SIZES",
    # one-line readings for a page's prose, measurements that are not timings
    "print_share_of", "print_best_and_worst", "print_ratios", "print_in_units",
    "print_call_floors", "print_ratio_range", "print_host_bound", "print_where_time_follows_work",
    "print_ridge_points", "print_share_range", "print_step_gains", "print_memory_cap",
    "print_at_ceilings", "print_host_and_gpu",
    # variants made from a page's function, and measurements that are not rates
    "random_inputs", "host_time", "gpu_time", "host_and_gpu_time", "on_cold_copies",
    "peak_memory", "first_call_ms", "empty_triton_cache", "distinct_results",
    "random_inputs_backward",
    # attention against PyTorch's SDPA backends
    "sdpa_backends", "attention_sweep", "SDPA_BACKENDS", "BACKWARD_FLOPS_OVER_FORWARD",
    # attention masks as pictures; same-bytes copies and memory-bound sweeps
    "draw_key_masks", "same_bytes_copy", "memory_bound_sweep", "SAME_BYTES_COPY",
    # a sweep over working sets of the memory hierarchy; kernels placed on the roofline
    "sweep_working_sets", "place_on_roofline",
    # one sweep variant per function, each on random inputs of the same shapes
    "random_inputs_each",
    # sweep variants over a setting of the call (x: a block size, a stage count), a sweep in
    # TFLOP/s under a GEMM ceiling, and its reading per setting against a vendor's kernel
    "random_inputs_by_setting", "compute_bound_sweep", "print_share_and_gain",
    # matrix products on random inputs, a sweep of them in TFLOP/s, and a gain beside the
    # gap between two timings of the same code
    "matmul_variant", "sweep_matmuls", "GEMM_CEILINGS", "print_gain_against_spread",
]
