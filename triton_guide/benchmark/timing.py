"""Timers: a call as a program makes it (:func:`median_ms`, ``do_bench``), the GPU's time
alone (:func:`gpu_ms` through a CUDA graph, :func:`queued_ms` behind a GPU sleep), the
host's alone (:func:`host_us`), cold inputs for them, and the rates they turn into. Each
refuses to time under the interpreter, where a kernel's run time measures numpy."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence

import triton

from ..runtime import timings_meaningful

NO_TIMINGS = (
    "Timings need a GPU: under the Triton interpreter a kernel's run time measures numpy on "
    "the CPU, not the kernel, so this benchmark is skipped."
)


def median_ms(fn: Callable[[], object]) -> float:
    """Median run time of ``fn()`` in milliseconds."""
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


# triton.testing.do_bench clears the L2 cache before each timed call by writing a buffer
# of this size (Triton 3.6 and 3.9: the driver's get_empty_cache_for_benchmark); a call's
# host time shorter than that write does not show in its timing.
DO_BENCH_CLEARING_BYTES = 256 * 2**20

# Calls timed by gpu_ms read at least this many bytes in all, so that together they overrun
# the L2 cache (50 MiB on an H100) and each call starts with its inputs in HBM.
COLD_BYTES = 256 * 2**20


def copies_for_cold_cache(bytes_per_call: int, at_least: int = 4) -> int:
    """How many copies of a call's inputs :func:`gpu_ms` needs: enough to overrun L2."""
    return max(at_least, math.ceil(COLD_BYTES / bytes_per_call))


# How long gpu_ms replays its graph untimed before timing it, in seconds.
WARMUP_S = 0.1

# Rounds of a host-timed sweep (Benchmark.sweep without gpu_time): every variant at every x
# is timed once per round, the rounds one after the other, and the median of the rounds
# kept. do_bench hides a call's host time only while its L2-clearing kernel runs (tens of
# microseconds); a launcher that needs 30-50 us of Python sits near that edge, and a spell
# of slow host (another process, say) lasting a few of do_bench's 0.1 s windows showed as
# one variant 2-5x slower at two or three neighbouring sizes in a recording and not in
# the next (seen on an H200). A spell shorter than a round spoils
# one round of a point, which the median drops.
HOST_TIMED_ROUNDS = 3


def gpu_ms(calls: Sequence[Callable[[], object]], replays: int = 25) -> float:
    """Median GPU time of one call, with the host's launch time left out, in milliseconds.

    ``calls`` do the same work on distinct copies of the inputs (see
    :func:`copies_for_cold_cache`). They are run once (to compile and autotune), captured
    back to back in one CUDA graph, and the graph is replayed untimed for WARMUP_S seconds,
    then ``replays`` times timed: a replay launches every kernel from the GPU's side, so no
    call waits for Python, and a call's inputs are out of L2 by the time it comes round
    again. ``median_ms`` (``do_bench``)
    times one call as a program makes it, host included whenever the host is the slower.
    """
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    for call in calls:
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    # A GPU that has been idle runs at a low clock and takes tens of milliseconds to speed
    # up; replays that short would time the ramp (the first size of a sweep came out 10-20%
    # slow on an H100 when it opened a page's first heavy section). So replay untimed first.
    warm_until = time.perf_counter() + WARMUP_S
    while True:
        graph.replay()
        torch.cuda.synchronize()
        if time.perf_counter() >= warm_until:
            break
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return sorted(times)[len(times) // 2] / len(calls)


def host_us(fn: Callable[[], object], calls: int = 200, repeats: int = 5) -> float:
    """The host's time per call of ``fn()``, in microseconds: the wall time of ``calls``
    back-to-back calls, the median over ``repeats``. A call returns once its kernels are
    queued, so this is the time Python and the launch take, as long as the queue never
    fills (``calls`` well below the ~1000 launches CUDA queues before the host waits)."""
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return sorted(times)[len(times) // 2]


def queued_ms(calls: Sequence[Callable[[], object]], rounds: int = 5) -> tuple[float, bool]:
    """GPU time of one call, in milliseconds, for calls that :func:`gpu_ms` cannot capture
    as they are: ``torch.autograd.grad`` runs each backward kernel on the stream of its
    forward, which ran before the capture began.

    Each round queues every call behind a GPU sleep longer than the host needs to launch
    them all, then times the calls with CUDA events. The GPU never waits for Python, so the
    time is the kernels' own, gaps between launches included; with rotating copies of the
    inputs (:func:`copies_for_cold_cache`) each call finds them out of L2. A round whose
    launches outlast its sleep (the GPU may have waited for the host) is thrown away and
    the sleep doubled. Returns the median GPU time per call over the rounds kept, and
    whether ``rounds`` of them were kept within ``4 * rounds`` tries.
    """
    if not timings_meaningful():
        raise RuntimeError(NO_TIMINGS)
    import torch

    for call in calls:  # compiles and autotunes; then one timed pass of the host alone
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for call in calls:
        call()
    host_s = time.perf_counter() - start
    torch.cuda.synchronize()
    # How many cycles torch.cuda._sleep spins per second on this GPU, measured.
    probe, begin, end = 10**7, torch.cuda.Event(enable_timing=True), torch.cuda.Event(
        enable_timing=True)
    begin.record()
    torch.cuda._sleep(probe)
    end.record()
    end.synchronize()
    cycles_per_s = probe / (begin.elapsed_time(end) * 1e-3)
    sleep_s = 4 * host_s + 5e-3
    gpu = []
    for _ in range(4 * rounds):
        if len(gpu) == rounds:
            break
        torch.cuda._sleep(int(cycles_per_s * sleep_s))
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start = time.perf_counter()
        begin.record()
        for call in calls:
            call()
        end.record()
        launched_s = time.perf_counter() - start
        end.synchronize()
        if launched_s < sleep_s:
            gpu.append(begin.elapsed_time(end))
        else:
            sleep_s *= 2
    if not gpu:
        return math.nan, False
    return sorted(gpu)[len(gpu) // 2] / len(calls), len(gpu) == rounds


def cold_matmul_inputs(m: int, n: int, k: int, dtype, device: str = "cuda") -> list[tuple]:
    """Random ``(a, b)`` pairs of an ``m x k`` by ``k x n`` product: as many as
    :func:`gpu_ms` needs for each call's inputs to be out of L2 when it runs."""
    import torch

    copies = copies_for_cold_cache((m * k + k * n) * dtype.itemsize)
    return [(torch.randn(m, k, device=device, dtype=dtype),
             torch.randn(k, n, device=device, dtype=dtype)) for _ in range(copies)]


def calls_on(fn: Callable[[object, object], object], pairs: Sequence[tuple]) -> list:
    """One call of ``fn(a, b)`` per pair (from :func:`cold_matmul_inputs`), for
    :func:`gpu_ms`."""
    return [lambda a=a, b=b: fn(a, b) for a, b in pairs]


def matmul_tflop_per_s(fn: Callable[[object, object], object], pairs: Sequence[tuple]) -> float:
    """The rate of ``fn(a, b)`` over ``pairs`` (from :func:`cold_matmul_inputs`) in GPU time,
    counting 2 * M * N * K floating-point operations per product."""
    (m, k), n = pairs[0][0].shape, pairs[0][1].shape[1]
    return tflop_per_s(2 * m * n * k, gpu_ms(calls_on(fn, pairs)))


def gb_per_s(num_bytes: float, ms: float) -> float:
    return num_bytes / ms * 1e-6


def tflop_per_s(num_flops: float, ms: float) -> float:
    return num_flops / ms * 1e-9


def us_per_call(num_bytes: float, rate_gb_per_s: float) -> float:
    """The time of one call, in microseconds, worked back from its rate (gb_per_s's inverse)."""
    return num_bytes / rate_gb_per_s * 1e-3


# A call that took this many times as long as a call of the same sweep doing more work.
OUT_OF_LINE = 1.5


def out_of_line(times: Sequence[float], factor: float = OUT_OF_LINE) -> list[int]:
    """Indices of the readings in ``times`` (one call's time per size, the sizes growing,
    each doing more work than the one before) that took over ``factor`` times as long as
    a later, larger call. More work cannot take that much less time, so such a reading
    says something about the run (the host busy, the clock not yet up), not the kernel.
    The factor leaves room for the noise of host-bound calls, whose times are level."""
    return [i for i, time_ in enumerate(times)
            if any(time_ > factor * later for later in times[i + 1:])]


@contextlib.contextmanager
def empty_triton_cache():
    """Point Triton's on-disk cache of compiled kernels at a new, empty folder for the
    duration, so that a first call compiles for real; the previous setting comes back."""
    previous = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="triton-guide-") as directory:
        os.environ["TRITON_CACHE_DIR"] = directory
        try:
            yield directory
        finally:
            if previous is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = previous


def first_call_ms(fn: Callable[[], object]) -> float:
    """Wall-clock milliseconds of one call of ``fn`` on the GPU with an empty Triton cache,
    from Python until its kernels have finished: compilation (and autotuning) included."""
    import torch

    with empty_triton_cache():
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3
