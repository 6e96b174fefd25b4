"""Variants for :meth:`~triton_guide.benchmark.Benchmark.sweep` and
:meth:`~triton_guide.benchmark.Benchmark.measure` made from a page's function: a call on
fresh random inputs (:func:`random_inputs`), the host's and the GPU's time of such a
call apart (:func:`host_and_gpu_time`, which
:func:`~triton_guide.benchmark.print_host_and_gpu` reads back), calls on enough copies of
the inputs to overrun the L2 cache (:func:`on_cold_copies`), and the extra peak memory of
a call (:func:`peak_memory`).

A sweep variant is a function that, given x, prepares inputs and returns the callable to
time; a measure variant, given x, returns a callable that measures once and returns the
value. Nothing here times anything under the interpreter: the timers refuse
(:data:`~triton_guide.benchmark.NO_TIMINGS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..runtime import device
from .host_readings import GPU_ALONE, HOST
from .timing import copies_for_cold_cache, gb_per_s, gpu_ms, host_us

GIB = 2**30


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


def on_cold_copies(prepare: Callable[[object], Callable[[], object]],
                   work: Callable[[object], float]) -> Callable[[object], list]:
    """A ``gpu_time=True`` sweep variant made from a host-timed one: given x, ``prepare(x)``
    called as many times as it takes for the calls' inputs, ``work(x)`` bytes each, to
    overrun the L2 cache together (:func:`~triton_guide.benchmark.copies_for_cold_cache`),
    so that each call of the replayed list starts with its inputs in HBM."""
    return lambda x: [prepare(x) for _ in range(copies_for_cold_cache(work(x)))]


def peak_memory(prepare: Callable[[object], Callable[[], object]]
                ) -> Callable[[object], Callable[[], float]]:
    """A :meth:`~triton_guide.benchmark.Benchmark.measure` variant made from a sweep's:
    given x, a callable that runs ``prepare(x)``'s call once and returns the peak memory
    it allocated on the GPU beyond what was allocated before it, in GiB (what the call
    returns is freed at once; the peak has counted it)."""
    def measure_at(x):
        call = prepare(x)

        def measure() -> float:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            call()
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - before) / GIB
        return measure
    return measure_at


def distinct_results(prepare: Callable[[object], Callable[[], object]], repeats: int
                     ) -> Callable[[object], Callable[[], float]]:
    """A :meth:`~triton_guide.benchmark.Benchmark.measure` variant made from a sweep's:
    given x, a callable that calls ``prepare(x)``'s callable ``repeats`` times on the same
    inputs and returns how many different results came back (1 for a deterministic
    kernel; a kernel that adds with atomics can return a different rounding each time)."""
    def measure_at(x):
        call = prepare(x)

        def count() -> float:
            import torch

            results = torch.stack([torch.as_tensor(call()).flatten() for _ in range(repeats)])
            return float(len(results.unique(dim=0)))
        return count
    return measure_at


def random_inputs_backward(fn: Callable[..., object], *shapes: Callable[[object], tuple],
                           dtype=None, warm: bool = False
                           ) -> Callable[[object], Callable[[], object]]:
    """A sweep variant that times a backward pass: given x, one standard-normal tensor of
    shape ``shape(x)`` for each of ``shapes`` (float32 unless ``dtype``, on the kernels'
    device), each requiring its gradient; ``fn`` called once on them (the forward, not
    timed); a standard-normal gradient of its output; and the callable that returns
    ``torch.autograd.grad`` of the output with respect to every input. It keeps the graph,
    so each call runs the same backward again. ``autograd.grad`` returns the gradients as
    a layer receives them; ``out.backward`` would also add them into each input's
    ``.grad``, more kernels in every timing. ``warm`` calls it once first."""
    def prepare(x):
        import torch

        tensors = [torch.randn(shape(x), device=device(), dtype=dtype or torch.float32,
                               requires_grad=True) for shape in shapes]
        out = fn(*tensors)
        call = functools.partial(torch.autograd.grad, out, tensors, torch.randn_like(out),
                                 retain_graph=True)
        if warm:
            call()
        return call
    return prepare


def same_bytes_copy(work: Callable[[object], float], dtype=None
                    ) -> Callable[[object], Callable[[], object]]:
    """A sweep variant: given x, a device-to-device copy that moves ``work(x)`` bytes in
    all, half read and half written (``dtype``, float32 unless given). Beside a
    memory-bound kernel whose rate counts ``work(x)`` bytes, it is the rate a plain copy
    of the same bytes reaches at each x: a yardstick where fixed costs weigh, not a bound
    (a kernel can beat PyTorch's copy at some sizes)."""
    def prepare(x):
        import torch

        element_size = torch.empty((), dtype=dtype or torch.float32).element_size()
        source = torch.randn(int(work(x)) // (2 * element_size), device=device(),
                             dtype=dtype or torch.float32)
        return functools.partial(torch.empty_like(source).copy_, source)
    return prepare


# The name memory_bound_sweep gives its copy of the same bytes as the kernels move.
SAME_BYTES_COPY = "copy, same bytes"


def memory_bound_sweep(bench, title: str, xs, variants: dict, work: Callable[[object], float],
                       *, label: str, xlabel: str | None = None, copy_dtype=None,
                       gpu_time: bool = False, logx: bool = True):
    """``bench.sweep`` (:meth:`~triton_guide.benchmark.Benchmark.sweep`) of memory-bound
    ``variants`` (sweep variants: given x, the callable to time) in GB/s of ``work(x)``, the
    bytes one call must move, under the copy ceiling. With ``copy_dtype``, one more variant,
    :data:`SAME_BYTES_COPY`: a copy of those bytes in that dtype (:func:`same_bytes_copy`),
    the roof at each x. With ``gpu_time``, every variant times calls on as many fresh inputs
    as overrun the L2 cache together (:func:`on_cold_copies`), host left out. Returns the
    :class:`~triton_guide.benchmark.Results`, live or recorded."""
    variants = dict(variants)
    if copy_dtype is not None:
        variants[SAME_BYTES_COPY] = same_bytes_copy(work, copy_dtype)
    if gpu_time:
        variants = {name: on_cold_copies(prepare, work) for name, prepare in variants.items()}
    return bench.sweep(title, xs, variants, lambda x, ms: gb_per_s(work(x), ms), label=label,
                       unit="GB/s", ceiling="copy", xlabel=xlabel, logx=logx,
                       gpu_time=gpu_time)


def random_inputs_each(fns: dict[str, Callable[..., object]], *shapes: Callable[[object], tuple],
                       dtype=None, warm: bool = False) -> dict:
    """Sweep variants, one per name of ``fns``, each :func:`random_inputs` of its function
    with the same ``shapes``, ``dtype`` and ``warm``: the functions compared on inputs of
    one kind, each call on tensors of its own. A shape function may return an int, the
    length of a vector: ``int`` itself as a shape gives a vector of x elements."""
    return {name: random_inputs(fn, *shapes, dtype=dtype, warm=warm)
            for name, fn in fns.items()}


def random_inputs_by_setting(fns: dict[str, Callable[..., object]], setting: str,
                             *shapes: tuple | int, dtype=None, warm: bool = False) -> dict:
    """Sweep variants whose x is a setting of the call, not its size (a block size, a stage
    count), one per name of ``fns``: given x, each draws one standard-normal tensor of each
    of the fixed ``shapes`` (an int is a vector's length; float32 unless ``dtype``, on the
    kernels' device) and returns the callable ``fn(*tensors, **{setting: x})``. A function
    that the setting does not change (a library's kernel beside ours) takes the keyword and
    ignores it. ``warm`` calls each once first, so that compiling happens before any timing
    starts."""
    def variant(fn):
        def prepare(x):
            import torch

            tensors = [torch.randn(shape, device=device(), dtype=dtype or torch.float32)
                       for shape in shapes]
            call = functools.partial(fn, *tensors, **{setting: x})
            if warm:
                call()
            return call
        return prepare
    return {name: variant(fn) for name, fn in fns.items()}



def compute_bound_sweep(bench, title: str, xs, variants: dict, flops: Callable[[object], float],
                        *, label: str, xlabel: str | None = None, ceiling: str = "gemm_fp16",
                        cold_bytes: Callable[[object], float] | None = None,
                        logx: bool = True):
    """``bench.sweep`` (:meth:`~triton_guide.benchmark.Benchmark.sweep`) of compute-bound
    ``variants`` (sweep variants: given x, the callable to time) in TFLOP/s of ``flops(x)``,
    one call's floating-point operations, under ``ceiling`` (a GEMM ceiling). With
    ``cold_bytes`` (given x, the bytes of one call's inputs) it times the GPU alone
    (``gpu_time``): every variant times calls on as many fresh inputs as overrun the L2
    cache together (:func:`on_cold_copies`). Without, each call is timed as a program makes
    it. Returns the :class:`~triton_guide.benchmark.Results`, live or recorded."""
    from .timing import tflop_per_s

    if cold_bytes is not None:
        variants = {name: on_cold_copies(prepare, cold_bytes)
                    for name, prepare in variants.items()}
    return bench.sweep(title, xs, variants, lambda x, ms: tflop_per_s(flops(x), ms),
                       label=label, unit="TFLOP/s", ceiling=ceiling, xlabel=xlabel, logx=logx,
                       gpu_time=cold_bytes is not None)


# The ceiling a product of each dtype is timed under: that dtype's cuBLAS GEMM.
GEMM_CEILINGS = {"float16": "gemm_fp16", "bfloat16": "gemm_bf16"}


def _square(x) -> tuple[int, int, int]:
    """``(m, n, k)`` of an ``x x x x x`` product: the products' shape unless one is given."""
    return x, x, x


def matmul_variant(fn: Callable[[object, object], object],
                   shape: Callable[[object], tuple[int, int, int]] | None = None, *,
                   dtype=None, b_by_columns: bool = False) -> Callable[[object], object]:
    """A sweep variant for a matrix product ``fn(a, b)``: given x, standard-normal ``a``
    (``m x k``) and ``b`` (``k x n``) of ``dtype`` (float16 unless given) on the device
    kernels run on, with ``(m, n, k) = shape(x)`` (``x x x x x`` unless given); with
    ``b_by_columns``, ``b`` is stored column by column (the transposed view of an ``n x k``
    tensor, as ``w.t()`` is). ``fn`` is called once first, so that compiling and
    autotuning happen before any timing; returns ``lambda: fn(a, b)``."""
    def prepare(x):
        import torch

        m, n, k = (shape or _square)(x)
        kind = dtype or torch.float16
        a = torch.randn(m, k, device=device(), dtype=kind)
        b = (torch.randn(n, k, device=device(), dtype=kind).t() if b_by_columns
             else torch.randn(k, n, device=device(), dtype=kind))
        fn(a, b)  # compile and autotune outside the timed region
        return lambda: fn(a, b)
    return prepare


def sweep_matmuls(bench, title: str, xs, fns: dict[str, Callable[[object, object], object]],
                  *, shape: Callable[[object], tuple[int, int, int]] | None = None,
                  dtype=None, b_by_columns: bool = False, gpu_time: bool = False,
                  label: str = "n", xlabel: str | None = None, logx: bool = True):
    """:func:`compute_bound_sweep` of the matrix products ``fns`` (name -> ``fn(a, b)``):
    TFLOP/s of ``2 m n k`` FLOPs a call, under the GEMM ceiling of ``dtype`` (float16
    unless given, or bfloat16), each variant :func:`matmul_variant` of its function with
    ``shape``, ``dtype`` and ``b_by_columns``. With ``gpu_time``, GPU time on as many copies
    of a and b as overrun the L2 cache together; otherwise each call is timed as a program
    makes it. ``xlabel`` is ``"n (n x n x n, float16)"`` for square products unless given,
    else ``label`` and the dtype. Returns the :class:`~triton_guide.benchmark.Results`,
    live or recorded."""
    import torch

    kind = dtype or torch.float16
    short = str(kind).removeprefix("torch.")
    if short not in GEMM_CEILINGS:
        raise ValueError(f"dtype={kind}: sweep_matmuls times "
                         f"{' and '.join(GEMM_CEILINGS)} products, under their GEMM ceilings")

    def flops(x) -> int:
        m, n, k = (shape or _square)(x)
        return 2 * m * n * k

    def input_bytes(x) -> int:  # a and b of one call
        m, n, k = (shape or _square)(x)
        return (m * k + k * n) * kind.itemsize

    variants = {name: matmul_variant(fn, shape, dtype=kind, b_by_columns=b_by_columns)
                for name, fn in fns.items()}
    default = f"n (n x n x n, {short})" if shape is None else f"{label} ({short})"
    return compute_bound_sweep(bench, title, xs, variants, flops, label=label,
                               xlabel=xlabel or default, ceiling=GEMM_CEILINGS[short],
                               cold_bytes=input_bytes if gpu_time else None, logx=logx)
