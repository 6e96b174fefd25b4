"""Variants for :meth:`~triton_guide.benchmark.Benchmark.sweep` and
:meth:`~triton_guide.benchmark.Benchmark.measure` made from a page's function: a call on
fresh random inputs (:func:`random_inputs`), and the host's and the GPU's time of such a
call apart (:func:`host_and_gpu_time`, which
:func:`~triton_guide.benchmark.print_host_and_gpu` reads back).

A sweep variant is a function that, given x, prepares inputs and returns the callable to
time; a measure variant, given x, returns a callable that measures once and returns the
value. Nothing here times anything under the interpreter: the timers refuse
(:data:`~triton_guide.benchmark.NO_TIMINGS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..runtime import device
from .readings import GPU_ALONE, HOST, on_cold_copies
from .timing import gpu_ms, host_us


def random_inputs(fn: Callable[..., object], *shapes: Callable[[object], tuple], dtype=None,
                  warm: bool = False) -> Callable[[object], Callable[[], object]]:
    """A sweep variant: given x, one standard-normal tensor of shape ``shape(x)`` for each
    of ``shapes``, of ``dtype`` (float32 unless given) on the device kernels run on
    (:func:`~triton_guide.runtime.device`), and the callable ``lambda: fn(*tensors)``.
    ``warm`` calls it once first, so that compiling and autotuning happen before any
    timing starts."""
    def prepare(x):
        import torch

        tensors = [torch.randn(shape(x), device=device(), dtype=dtype or torch.float32)
                   for shape in shapes]
        if warm:
            fn(*tensors)
        return lambda: fn(*tensors)
    return prepare


def host_time(prepare: Callable[[object], Callable[[], object]]
              ) -> Callable[[object], Callable[[], float]]:
    """A measure variant in microseconds per call: given x, the host's time per call of
    ``prepare(x)``'s callable (:func:`~triton_guide.benchmark.host_us`: back-to-back calls,
    each returning once its kernels are queued)."""
    return lambda x: functools.partial(host_us, prepare(x))


def gpu_time(prepare: Callable[[object], Callable[[], object]],
             work: Callable[[object], float]) -> Callable[[object], Callable[[], float]]:
    """A measure variant in microseconds per call: given x, the GPU's time of one call with
    the host left out (:func:`~triton_guide.benchmark.gpu_ms`, calls replayed from a CUDA
    graph), over calls on as many fresh inputs from ``prepare`` as it takes for them,
    ``work(x)`` bytes each, to overrun the L2 cache together
    (:func:`~triton_guide.benchmark.on_cold_copies`)."""
    def measure_at(x):
        calls = on_cold_copies(prepare, work)(x)
        return lambda: gpu_ms(calls) * 1e3
    return measure_at


def host_and_gpu_time(prepares: dict[str, Callable[[object], Callable[[], object]]],
                      work: Callable[[object], float]) -> dict:
    """Measure variants, in microseconds per call, that take the two parts of a call
    apart for each name of ``prepares`` (sweep variants): ``"<name>, host"``
    (:func:`host_time`) for every name, then ``"<name>, GPU alone"`` (:func:`gpu_time`,
    ``work(x)`` being one call's bytes)."""
    return {**{f"{name}, {HOST}": host_time(prepare) for name, prepare in prepares.items()},
            **{f"{name}, {GPU_ALONE}": gpu_time(prepare, work)
               for name, prepare in prepares.items()}}
