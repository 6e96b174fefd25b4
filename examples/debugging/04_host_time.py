"""
Host time and GPU time
======================

A kernel that matches PyTorch's on the GPU can still lose to it as called. Before the GPU
runs anything, the host (the CPU, running Python) makes the call: it checks the
arguments, allocates the output and launches the kernel. PyTorch does that in C++; a
Triton launcher does it in Python, and for a small tensor that can take longer than the
kernel itself. This page measures that gap on the smallest kernel there is, a vector add
of 4,096 elements, and three ways of closing it. Every timing was taken on a GPU: live
when this build ran on one, else recalled from the recordings in
``triton_guide/_results/``. The interpreter times nothing.

You will learn:

* three clocks for one call (host time, GPU time, time as called) and what each hides;
* how to see a waiting GPU in a profiler trace;
* where a Triton launch spends its host time: the checks, the launch key, the lookup;
* what a cached launch, a CUDA graph and ``torch.compile`` each take off.
"""

# %%
import functools
import operator
import statistics

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from triton_guide import runtime
from triton_guide.benchmark import Benchmark, copies_for_cold_cache, gpu_ms, host_us, median_ms
from triton_guide.launch import fast_launch, launch_key
from triton_guide.vector_add import vector_add, vector_add_kernel

torch.manual_seed(0)
bench = Benchmark()  # timings: live on a GPU, else the recorded ones
print(bench.stamp())
device = runtime.device()
SMALL, LARGE = 4096, 2**26  # elements: a few microseconds of GPU time, and hundreds


def pair(n):
    """Two random float32 vectors of n elements."""
    return torch.randn(n, device=device), torch.randn(n, device=device)


x, y = pair(SMALL)
print(f"vector_add matches x + y: {torch.equal(vector_add(x, y), x + y)}")

# %%
# Three clocks
# ------------
# One call can be timed three ways, each with a helper of ``triton_guide.benchmark``
# (the method: :doc:`/measuring`):
#
# * **host time** (``host_us``): the wall time of 200 calls back to back, per call. A
#   launch returns once the kernel is queued, so this is the host's work alone;
# * **GPU time** (``gpu_ms``): calls on copies of the inputs, captured in a CUDA graph
#   and replayed, so that no kernel waits for Python; the kernel's work alone;
# * **as called** (``median_ms``, Triton's ``do_bench``): one call at a time, the L2
#   cache cleared before each. Clearing writes 256 MiB, and the host prepares the next
#   call meanwhile, so a host time shorter than the clearing does not show.
#
# A loop of calls runs at the pace of the slower of the first two. Both ops, at two sizes:

cases = {f"{name}, n = {n:,}": (fn, n) for n in (SMALL, LARGE)
         for name, fn in (("x + y", operator.add), ("vector_add", vector_add))}


def host_clock(case):
    fn, n = cases[case]
    return functools.partial(host_us, functools.partial(fn, *pair(n)))


def gpu_clock(case):
    fn, n = cases[case]
    copies = [pair(n) for _ in range(copies_for_cold_cache(3 * 4 * n))]
    return lambda: gpu_ms([functools.partial(fn, *p) for p in copies]) * 1e3


def called_clock(case):
    fn, n = cases[case]
    return lambda: median_ms(functools.partial(fn, *pair(n))) * 1e3


clocks = bench.measure("three clocks", list(cases),
                       {"host": host_clock, "GPU": gpu_clock, "as called": called_clock},
                       label="call", unit="us per call")

# %%
# Ours against torch's on each clock, and which side a loop of our calls waits for:

for run in clocks:
    for n in (SMALL, LARGE):
        ours, torchs = (run.xs.index(f"{name}, n = {n:,}") for name in ("vector_add", "x + y"))
        ratios = ", ".join(f"{clock} {run[clock][ours] / run[clock][torchs]:.2f}x"
                           for clock in run.series)
        host, gpu = run["host"][ours], run["GPU"][ours]
        waits = ("the GPU waits for the host" if host > gpu
                 else "the host keeps ahead of the GPU")
        print(f"{run.gpu}, n = {n:,}: vector_add / x + y: {ratios}; vector_add: host "
              f"{host:.1f} us, GPU {gpu:.1f} us, so {waits}")

# %%
# Where a call's host time is above its GPU time, a loop of such calls runs at the
# host's pace, and a faster kernel would change nothing; compare the host ratio with the
# GPU ratio at the small size. Where the GPU time is the larger, the host's work hides
# behind the kernels already queued. The third clock shows a host time only when it
# outlasts the cache clearing, whose length differs from GPU to GPU: a sweep timed that
# way (the plots of other pages) can look host-bound at its smallest sizes on one GPU and
# not on another.
#
# See it in a trace
# -----------------
# A profiler shows the same thing as a timeline. Below, ``torch.profiler`` records the
# GPU's side of 50 calls (the kernels, with their start and end times), and the trace is
# summarised as two numbers: how long each kernel ran, and how far apart the kernels
# started. When the second is the larger, the GPU sat idle in between, waiting for the
# next launch. (The profiler's own bookkeeping can lengthen the intervals a little.)


def trace(fn, calls=50):
    """Median kernel duration and median start-to-start interval (us) over a trace."""
    fn()
    torch.cuda.synchronize()
    # acc_events: one cycle here; without it, torch warns that a new cycle would clear them.
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as recorded:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = sorted((event.time_range.start, event.time_range.end)
                     for event in recorded.events() if event.device_type == DeviceType.CUDA)
    starts = [start for start, _ in kernels]
    return (statistics.median(end - start for start, end in kernels),
            statistics.median(b - a for a, b in zip(starts, starts[1:])))


# %%
# Both ops at the small size; per GPU, the share of the loop the GPU spent idle:


@functools.cache  # one trace per op gives both numbers
def small_trace(name):
    return trace(functools.partial(vector_add if name == "vector_add" else operator.add,
                                   *pair(SMALL)))


timeline = bench.measure("a profiler trace", ["x + y", "vector_add"],
                         {"kernel": lambda name: lambda: small_trace(name)[0],
                          "start to start": lambda name: lambda: small_trace(name)[1]},
                         label="call", unit="us")
for run in timeline:
    idle = ", ".join(f"{name} {1 - run['kernel'][i] / run['start to start'][i]:.0%}"
                     for i, name in enumerate(run.xs))
    print(f"{run.gpu}, n = {SMALL:,}: GPU idle between kernels: {idle}")

# %%
# Where the host's time goes
# --------------------------
# The package's launcher checks its arguments, allocates the output and launches:
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: vector_add
#
# .. literalinclude:: /../triton_guide/vector_add.py
#    :pyobject: _launch
#
# Each ``check_*`` is a few Python lines. ``_vector_add`` picks the path (autograd, or
# not) per call. Then the launch: ``vector_add_kernel[grid](...)`` binds the arguments to
# the kernel's signature, works out how each specialises the compiled code, builds a key
# from that, looks the compiled kernel up, builds launch metadata, and at last calls the
# driver. ``x + y`` does the same kinds of things in C++. The key is worth a look: a
# kernel is compiled apart for each dtype, for pointers aligned to 16 bytes or not, and
# for integers that divide by 16, do not, or equal 1. The package's cached launch
# (``triton_guide.launch``) keys on exactly those facts; here, for three calls:

out = torch.empty_like(x)
for label, args in (("aligned, n = 4096", (x, y, out, SMALL)),
                    ("n = 4095", (x, y, out, SMALL - 1)),
                    ("x[1:] (4 bytes in)", (x[1:], y, out, SMALL - 1))):
    print(f"{label:<19} {launch_key(args)}")

# %%
# A pointer contributes its dtype and whether it is aligned; the length ``2`` for a
# multiple of 16 and ``3`` otherwise. Computing this is cheap; Triton's general path
# computes more, for every argument, on every call. Host time per call of each layer,
# from the whole op down to Triton's launcher called with the compiled kernel in hand
# (the last three reuse one output tensor, so they allocate nothing):


GRID = (SMALL // 1024,)  # programs of BLOCK_SIZE 1024, as vector_add launches them


def launch_path(name):
    x, y = pair(SMALL)
    out = torch.empty_like(x)
    args, constexprs = (x, y, out, SMALL), {"BLOCK_SIZE": 1024, "INT64_OFFSETS": False}
    compiled = vector_add_kernel[GRID](*args, **constexprs)
    stream = torch.cuda.current_stream().cuda_stream
    fn = {"x + y": lambda: x + y, "vector_add": lambda: vector_add(x, y),
          "kernel[grid]": lambda: vector_add_kernel[GRID](*args, **constexprs),
          "fast_launch": lambda: fast_launch(vector_add_kernel)[GRID](*args, **constexprs),
          "compiled.run": lambda: compiled.run(  # the C launcher, through Triton's wrapper
              GRID[0], 1, 1, stream, compiled.function, compiled.packed_metadata, None, None,
              None, *args, *constexprs.values())}[name]
    return functools.partial(host_us, fn)


paths = bench.measure("launch paths", ["x + y", "vector_add", "kernel[grid]", "fast_launch",
                                       "compiled.run"],
                      {"host per call": launch_path}, label="call", unit="us")

# %%
# The differences between neighbouring rows, per GPU:

for run in paths:
    us = dict(zip(run.xs, run["host per call"]))
    print(f"{run.gpu}: checks, allocation and path choice "
          f"{us['vector_add'] - us['fast_launch']:.1f} us; Triton's binding, key and lookup "
          f"{us['kernel[grid]'] - us['compiled.run']:.1f} us, fast_launch's own "
          f"{us['fast_launch'] - us['compiled.run']:.1f} us; compiled.run alone "
          f"{us['compiled.run'] / us['x + y']:.2f}x the whole of x + y")

# %%
# A cached launch
# ---------------
# ``fast_launch(kernel)[grid](...)`` is the first fix, and the one ``_launch`` above
# uses: the first call of each key goes through Triton, which compiles or autotunes as
# usual, and the compiled kernel is kept under the key; later calls with the same key
# go straight to ``compiled.run``. What is left still costs Python: the checks, the
# allocation, and Triton's launcher wrapper, which the last line compares with all of
# ``x + y``. Closing the rest of the gap takes removing the Python from the loop.
#
# CUDA graphs
# -----------
# A CUDA graph records the kernels a stretch of code launches, with their arguments, and
# replays them with one call: no Python runs per kernel. Capture a loop of 100 calls and
# replay it:

GRAPH_CALLS = 100


def graphed(fn):
    """The replay of a CUDA graph holding GRAPH_CALLS calls of fn."""
    fn()  # compiles, and picks the launch, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            fn()
    return graph.replay


def replay_host(name):
    fn = functools.partial(vector_add if name == "vector_add" else operator.add, *pair(SMALL))
    replay = graphed(fn)  # 5 replays: 500 kernels, fewer than CUDA queues before it waits
    return lambda: host_us(replay, calls=5) / GRAPH_CALLS


replayed = bench.measure("replayed from a CUDA graph", ["x + y", "vector_add"],
                         {"host per call": replay_host}, label="call", unit="us")
for run in replayed:
    clock = next((c for c in clocks if c.slug == run.slug), None)
    for i, name in enumerate(run.xs):
        if clock is not None:
            gpu = clock["GPU"][clock.xs.index(f"{name}, n = {SMALL:,}")]
            side = "below" if run["host per call"][i] < gpu else "above"
            print(f"{run.gpu}, {name}: {run['host per call'][i]:.2f} us of host per call "
                  f"replayed, {side} its {gpu:.1f} us of GPU time")

# %%
# The price: a replay repeats what was captured, nothing else. The same addresses (copy
# new inputs into the captured tensors), the same shapes, the same kernels: the checks
# and the autotuner's choice are not run again, and the outputs are overwritten by the
# next replay.
#
# ``torch.compile``
# -----------------
# The package's ops are PyTorch operators (:class:`~triton_guide.library.Operator`), so
# ``torch.compile`` traces through the checks, turns what they read (dtype, shape,
# device) into guards checked before each call, and keeps the launch as one opaque node.
# Here is the graph it captures, printed by a backend that shows the graph and runs it
# as it is:


def show_graph(graph_module, example_inputs):
    nodes = [str(node.target) for node in graph_module.graph.nodes
             if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)]
    print("operators in the captured graph:", nodes)
    return graph_module.forward


compiled_add = torch.compile(vector_add, backend=show_graph, fullgraph=True)
print(f"compiled graph matches x + y: {torch.equal(compiled_add(x, y), x + y)}")

# %%
# The node's implementation is the launcher ``_launch``, so by default the compiled
# function still runs its Python on every call, behind the guards and the operator's
# dispatch. ``mode="reduce-overhead"`` asks for CUDA graphs as well (it copies the inputs
# into the captured tensors itself), where Inductor judges the graph safe to capture.
# Host time per call of both, on the small size, and whether a graph was replayed (a host
# time below the eager call's GPU time, as in the CUDA graph section) or not:


def compiled_host(mode):
    torch._dynamo.reset()  # a fresh compilation for each mode
    fn = functools.partial(torch.compile(vector_add, mode=mode), *pair(SMALL))
    for _ in range(3):  # compiles; reduce-overhead records its graph on a later call
        fn()
    return lambda: host_us(fn)


compiled = bench.measure("torch.compile", ["default", "reduce-overhead"],
                         {"host per call": compiled_host}, label="mode", unit="us")
for run in compiled:
    eager = next((dict(zip(p.xs, p["host per call"]))["vector_add"] for p in paths
                  if p.slug == run.slug), None)
    for mode, value in zip(run.xs, run["host per call"]):
        against = "" if eager is None else f", {value / eager:.2f}x eager vector_add's"
        print(f"{run.gpu}, mode={mode}: {value:.1f} us per call{against}")
    gpu = next((c["GPU"][c.xs.index(f"vector_add, n = {SMALL:,}")] for c in clocks
                if c.slug == run.slug), None)
    if gpu is not None:
        replayed_here = run["host per call"][run.xs.index("reduce-overhead")] < gpu
        print(f"  {run.gpu}: reduce-overhead "
              + ("replayed a graph" if replayed_here else "replayed no graph: the operator's "
                 "Python ran on every call"))

# %%
# Takeaways
# ---------
# Per GPU, one call of ``vector_add`` on 4,096 elements: its host time per call each
# way, from the tables above, against its GPU time. A way whose host time is below the
# GPU time keeps the GPU busy in a loop of such calls.

for run in clocks:
    ways = {"eager": run["host"][run.xs.index(f"vector_add, n = {SMALL:,}")]}
    for name, results, row in (("CUDA graph", replayed, "vector_add"),
                               ("reduce-overhead", compiled, "reduce-overhead")):
        for other in results:
            if other.slug == run.slug:
                ways[name] = other["host per call"][other.xs.index(row)]
    gpu = run["GPU"][run.xs.index(f"vector_add, n = {SMALL:,}")]
    print(f"{run.gpu}: GPU time {gpu:.1f} us; host time " + ", ".join(
        f"{name} {value:.2f} us ({'below' if value < gpu else 'above'})"
        for name, value in ways.items()))

# %%
# * On small tensors, time the host as well as the GPU: a Python launcher can take
#   longer than its kernel, and then the GPU waits; a trace shows the gaps.
# * A cached launch takes off Triton's per-call bookkeeping, not the checks; a CUDA
#   graph takes off all the Python, for calls that repeat exactly; ``torch.compile``
#   keeps an opaque operator's Python and adds its guards and the operator's dispatch:
#   the lines above say, per GPU, what that cost and whether ``reduce-overhead`` replayed
#   a graph.
#
# Used here: :func:`triton_guide.vector_add.vector_add`,
# :func:`triton_guide.launch.fast_launch`, :func:`triton_guide.launch.launch_key`,
# :func:`triton_guide.benchmark.host_us`, :func:`triton_guide.benchmark.gpu_ms`,
# :func:`triton_guide.benchmark.median_ms`, :class:`triton_guide.benchmark.Benchmark`.
