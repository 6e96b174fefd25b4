"""
Gluon: a matmul whose layouts, shared memory and barriers are written out
=========================================================================

Triton decides a great deal for a kernel: which thread holds which element (the
*layout*), which tiles go through shared memory and in how many buffers, where the
barriers go that say a copy has landed, and how the warps split into the *warp groups*
that Hopper's tensor-core instruction ``wgmma`` needs. Gluon
(``triton.experimental.gluon``) is Triton's lower-level language, in which the kernel
writes each of these itself: more code, and nothing left to a compiler pass that may or
may not find the pipeline you meant.

You will learn:

* Gluon's model on the smallest kernel, a copy: an explicit ``BlockedLayout``;
* a matmul pipeline written by hand: a ring of shared-memory slots filled by TMA, one
  ``mbarrier`` per slot, ``wgmma`` consuming one slot while the next ones load;
* what the compiler made of both (registers, shared memory, the loop's instructions),
  and how the hand-written pipeline compares with ``triton_guide.matmul`` and cuBLAS.

Gluon has no interpreter mode, and these kernels use Hopper's TMA and ``wgmma``: they run
only on an sm_90 GPU (H100, H200). Every build, on a CPU too, compiles them for sm_90 and
reads back what the compiler made; the runs and timings are live on an sm_90 GPU, and
recorded ones otherwise (the first line printed below says which).
"""

# %%
import torch
import triton

from triton_guide import compiled, matmul, matmul_reference, runtime
from triton_guide import gluon_matmul as gm
from triton_guide.benchmark import Benchmark, sweep_matmuls
from triton_guide.testing import assert_close, tolerance

torch.manual_seed(0)  # the same inputs, so the same printed numbers, in every build
bench = Benchmark()
print(bench.stamp())
device = runtime.device()
on_sm90 = device.type == "cuda" and torch.cuda.get_device_capability(device) == (9, 0)

# %%
# The copy kernel: a layout, stated
# ---------------------------------
# In Triton, ``tl.arange(0, BLOCK)`` is a block of values and the compiler picks how the
# program's threads share it. In Gluon the block carries its layout: a ``BlockedLayout``
# gives each thread ``size_per_thread`` contiguous elements, 32 threads a warp, and
# ``warps_per_cta`` warps a program, repeated until the block is covered. Here each thread
# holds 16 bytes at a time, so each load and store can be one 128-bit access:
#
# .. literalinclude:: /../triton_guide/gluon_matmul.py
#    :pyobject: copy_kernel
#
# .. literalinclude:: /../triton_guide/gluon_matmul.py
#    :pyobject: copy_layout
#
# Both kernels compiled for sm_90 by this build's Triton, in a separate process that needs
# no GPU (:func:`~triton_guide.gluon_matmul.compile_for_sm90`); the matmul in its default
# configuration and in a smaller one:

jobs = [gm.DEFAULT_JOBS[0]] + [job for job in gm.DEFAULT_JOBS if job["kernel"] == "matmul"
                               and job["dtype"] == "float16" and job["config"] != "128x128x64 s4 w4"]
made = {k.name: k for k in gm.compile_for_sm90(jobs)}
print(f"compiled for sm_90 by triton {triton.__version__}")
for k in made.values():
    fit = k.occupancy()
    print(f"{k.name:<30} {k.num_warps} warps, {k.registers:>3} registers, {k.spills} spills, "
          f"{k.shared:>6} bytes shared: {fit.programs} program(s) per SM "
          f"({', '.join(fit.limited_by)})")
copy = made["copy fp16"]
per_thread = gm.COPY_BLOCK // (32 * gm.COPY_WARPS)
print(f"\ncopy fp16: {gm.COPY_BLOCK} elements a program, {per_thread} a thread, "
      f"{per_thread * 2 // 16} runs of 16 bytes; its loads and stores: "
      f"{compiled.loop_summary(copy, ('ld.global.v4', 'st.global.v4', 'ld.global'))}")
print("\n".join("  " + line for line in compiled.excerpt(copy.loop(), most=2)))

# %%
# ``ld.global.v4`` and ``st.global.v4`` move four 32-bit registers, 16 bytes, per access,
# as the layout asked, one of each per run. On an sm_90 GPU the copy runs, and is checked
# exact on a size that is not a multiple of the block:

if on_sm90:
    x = torch.randn(1_000_003, device=device, dtype=torch.float16)
    print(f"gluon_copy of {x.numel():,} float16 values exact: {torch.equal(gm.gluon_copy(x), x)}")
else:
    print("Not run in this build: Gluon kernels run only on an sm_90 GPU, and Gluon has no "
          "interpreter.")

# %%
# The matmul: a pipeline written by hand
# --------------------------------------
# One program computes one ``BLOCK_M x BLOCK_N`` tile of c. What the Triton matmul's
# ``num_stages`` asks the compiler to build, this kernel builds itself:
#
# * **Slots.** ``allocate_shared_memory`` reserves ``STAGES`` slots for a tile of a and
#   ``STAGES`` for a tile of b, laid out for ``wgmma`` (``NVMMASharedLayout``).
# * **One mbarrier per slot.** ``mbarrier.expect`` tells a slot's barrier how many bytes
#   to wait for; the two TMA copies (``tma_load``) count their bytes against it when they
#   land, and the barrier completes a *phase*. The slot is reused once per lap of the
#   ring, so the phase to wait for flips each lap: ``(k_tile // STAGES) & 1``.
# * **TMA ahead, wgmma behind.** Before the loop, ``STAGES - 1`` slots are filled. Each
#   iteration waits for its slot, starts ``warpgroup_mma`` asynchronously, then
#   ``warpgroup_mma_wait(num_outstanding=1)`` waits until only that product is still
#   running: the one before it has finished reading its slot, which takes the tile
#   ``STAGES - 1`` steps ahead.
# * **Warp groups.** The accumulator's ``NVMMADistributedLayout`` stacks warps along M,
#   16 rows each: 8 warps are two warp groups of 64 rows, each issuing its own ``wgmma``.
#
# .. literalinclude:: /../triton_guide/gluon_matmul.py
#    :pyobject: matmul_kernel
#
# The launcher, :func:`~triton_guide.gluon_matmul.gluon_matmul`, builds the three TMA
# descriptors, copies an operand whose rows TMA cannot read into aligned rows, and
# launches one program per tile. The kernel is written for Triton 3.6, the GPU image's;
# Gluon is still changing: Triton 3.9 renames the TMA copies ``tma.async_load`` and
# ``tma.async_store``, and ``tma_load`` and ``tma_store`` are whichever names this
# Triton has (the version that compiled it is printed above). What the compiler made of
# the loop:

for name in ("matmul fp16 128x256x64 s3 w8", "matmul fp16 128x128x64 s3 w4"):
    k, config = made[name], gm.CONFIGS[name.removeprefix("matmul fp16 ")]
    slots = config.stages * (config.block_m + config.block_n) * config.block_k * 2
    print(f"{name}: {config.stages} slots of a and b tiles = {slots:,} bytes, "
          f"{k.shared - slots} more for barriers; loop: "
          + compiled.loop_summary(k, ("wgmma.mma_async", "cp.async.bulk.tensor",
                                      "mbarrier.try_wait")))
default = made["matmul fp16 128x256x64 s3 w8"]
print("\n".join("  " + line for line in compiled.excerpt(default.loop())))
per_warp_group = gm.DEFAULT_CONFIG.block_k // 16
print(f"BLOCK_K = {gm.DEFAULT_CONFIG.block_k} is {per_warp_group} wgmma instructions of "
      f"k16 per warp group; two TMA copies (a tile of a, one of b) per step")

# %%
# Each step of the loop: one wait on the slot's barrier (``mbarrier.try_wait``), a
# ``bar.sync`` of the program's own warps that the compiler adds, the K-slice of ``wgmma``
# of each warp group (``m64n256k16``: 64 rows, the tile's 256 columns, 16 of K), and two
# TMA copies (``cp.async.bulk.tensor``) that refill a slot.
#
# Checked against float64
# -----------------------
# On an sm_90 GPU: float16 and bfloat16 at a size that is a multiple of no tile (N and K
# odd, so the launcher copies a and b into rows 16 bytes aligned first).

if on_sm90:
    m, n, k = 1031, 517, 2063
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        error = assert_close(gm.gluon_matmul(a, b), matmul_reference(a.double(), b.double()),
                             rtol=tolerance(dtype, tensor_cores=True))
        print(f"{m} x {n} x {k} {str(dtype).removeprefix('torch.')}: relative error "
              f"{error:.1e}")
else:
    print("Not run in this build (no sm_90 GPU); tests/test_gluon_matmul.py checks every "
          "configuration at five odd sizes in both dtypes on one.")

# %%
# Against the Triton matmul and cuBLAS
# ------------------------------------
# ``gluon`` (the default configuration), ``triton_guide.matmul`` (autotuned, tensor
# descriptors) and cuBLAS, on a square product and on a ragged one that no tile divides.
# First in GPU time on inputs too large together for L2 (:doc:`/measuring`), float16 and
# bfloat16, under each dtype's cuBLAS ceiling:

shapes = {"2000x3000x1000": (2000, 3000, 1000), "4096^3": (4096, 4096, 4096)}
calls = {"gluon": gm.gluon_matmul, "triton_guide.matmul": matmul, "cuBLAS": matmul_reference}
runs = {}
if bench.live and not on_sm90:
    print("This GPU is not sm_90: the Gluon kernels do not run here, nothing is timed.")
else:
    for dtype, short in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        runs[f"GPU time {short}"] = sweep_matmuls(
            bench, f"gluon matmul {short}, GPU time", list(shapes), calls, shape=shapes.get,
            dtype=dtype, gpu_time=True, label="M x N x K", logx=False)
    runs["GPU time fp16"].plot()

# %%
# Then as a program calls it, host included (``do_bench``, each call on the same inputs,
# compiled and autotuned first), float16:

if runs:
    runs["as called fp16"] = sweep_matmuls(bench, "gluon matmul fp16, as called", list(shapes),
                                           calls, shape=shapes.get, label="M x N x K", logx=False)

# %%
# Each of ours as a fraction of cuBLAS, per GPU and shape:

shares = {}  # (timing, gpu, shape) -> {variant: fraction of cuBLAS}
for timing, results in runs.items():
    for run in results:
        for i, shape in enumerate(run.xs):
            shares[timing, run.gpu, shape] = {
                name: run[name][i] / run["cuBLAS"][i] for name in ("gluon", "triton_guide.matmul")}
            print(f"{run.gpu}, {timing}, {shape}: " + ", ".join(
                f"{name} {share:.2f}x" for name, share in shares[timing, run.gpu, shape].items())
                + " cuBLAS")

# %%
# Takeaways
# ---------
# From what this page compiled and printed above:

fit = default.occupancy()
counts = compiled.instruction_counts(default.loop())
print(f"* The default matmul: {default.shared:,} bytes of shared memory, {fit.programs} "
      f"program(s) per SM, {default.spills} spills; its loop holds {counts['wgmma.mma_async']} "
      f"wgmma, {counts['cp.async.bulk.tensor']} TMA copies, "
      f"{counts['mbarrier.try_wait']} barrier wait(s).")
sms = torch.cuda.get_device_properties(device).multi_processor_count if on_sm90 else 132
tiles = triton.cdiv(2000, 128) * triton.cdiv(3000, 256)
wave = sms * fit.programs
print(f"* 2000x3000x1000 in 128x256 tiles: {tiles} programs, {wave} at a time on "
      f"{sms} SMs ({'this GPU' if on_sm90 else 'an H100 or H200'}): {tiles / wave:.2f} "
      f"waves, the last one {tiles % wave or wave} programs of {wave}.")
for (timing, gpu, shape), found in shares.items():
    if shape == "4096^3":
        ragged = shares[timing, gpu, "2000x3000x1000"]["gluon"]
        print(f"* {gpu}, {timing}: gluon {found['gluon']:.2f}x cuBLAS at 4096^3 "
              f"({found['gluon'] / found['triton_guide.matmul']:.2f}x triton_guide.matmul), "
              f"{ragged:.2f}x at 2000x3000x1000.")
if not shares:
    print("* No GPU timings recorded yet for this page: how the Gluon matmul compares with "
          "triton_guide.matmul and cuBLAS is not shown in this build.")

# %%
# Writing the pipeline out makes every buffer and every wait visible, in the kernel and in
# the compiled loop; whether that buys speed over a compiler that builds a pipeline itself
# is what the timings above say, GPU by GPU. Neither changes the waves: a tile count just
# past a multiple of the SMs leaves SMs idle at the end, as the waves of 2000x3000x1000
# printed above show. Next: the loads and the
# products in warp groups of their own (warp specialisation), with register budgets.
#
# Used here: :func:`triton_guide.gluon_matmul.gluon_matmul`,
# :func:`triton_guide.gluon_matmul.gluon_copy`,
# :func:`triton_guide.gluon_matmul.compile_for_sm90`,
# :func:`triton_guide.compiled.loop_summary`, :func:`triton_guide.compiled.excerpt`,
# :func:`triton_guide.matmul`, :class:`triton_guide.benchmark.Benchmark`,
# :func:`triton_guide.benchmark.sweep_matmuls`.
