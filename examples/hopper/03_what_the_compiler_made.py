"""
What the compiler made: registers, shared memory and the inner loop of each kernel
===================================================================================

Every kernel of the core lessons, as the package launches it, compiled for a Hopper GPU
(sm_90: an H100 or H200) and read back: registers per thread, registers spilled to local
memory, shared memory per program, how many programs fit on one SM at once, and which
instructions its inner loop is made of.

You will learn:

* what limits how many programs an SM runs at once (registers, shared memory, threads),
  and how to work it out from three numbers of the compiled kernel;
* which resource holds each kernel back, and what a register spill looks like in the
  machine code;
* how to spot the Hopper instructions in a kernel's PTX: ``wgmma.mma_async`` (tensor-core
  products that run while the warp goes on), ``cp.async.bulk.tensor`` (TMA copies of
  whole tiles), and the wide ``ld.global.v4`` loads of the memory-bound kernels.

Nothing here needs a GPU. Triton compiles for a target it is told, and its wheel ships
NVIDIA's assembler and binary tools: every build, on a CPU too, compiles these kernels for
sm_90 as it goes. On a GPU the page also reads the GPU's own compiled kernels and
compares.
"""

# %%
# The launches the package makes
# -------------------------------
# :func:`~triton_guide.compiled.record_launches` calls an op with every kernel launch
# intercepted: the kernels, arguments and constexprs are the ones its launcher picks for
# these inputs, and nothing runs. Two ops autotune, and an autotuner's choice needs a GPU's
# timings: for those, the page compiles a stated configuration (the matmul's large tile,
# which the package also launches itself for full waves; the attention kernels' first
# candidate for head_dim 128).
import torch
import triton

import triton_guide as tg
from triton_guide import compiled, runtime
from triton_guide.attention_tiles import TUNED
from triton_guide.matmul import WAVE_TILE


def empty(*shape, dtype=torch.float16, grad=False):
    return torch.empty(shape, dtype=dtype, device=runtime.device(), requires_grad=grad)


x, w = empty(4096, 4096, grad=True), empty(4096, grad=True)
q = empty(4, 16, 4096, 128, grad=True)  # batch, heads, sequence, head_dim
logits, labels = empty(4096, 32000, grad=True), torch.zeros(4096, dtype=torch.long, device=x.device)

# %%
# Each op called once, forward and, where it is differentiable, backward:
kernels = compiled.record_kernels
norm = kernels(tg.layer_norm, x, w, w, backward=True)
attention = kernels(tg.attention, q, q, q, causal=True, backward=True)
launches = {
    "vector add": kernels(tg.vector_add, empty(2**24), empty(2**24))["vector_add_kernel"],
    "softmax": kernels(tg.softmax, empty(4096, 4096, dtype=torch.float32))["softmax_kernel"],
    "matmul": kernels(tg.matmul, empty(4096, 4096), empty(4096, 4096))["matmul_tma_kernel"],
    "cross-entropy": kernels(tg.cross_entropy, logits, labels,
                             backward=True)["cross_entropy_forward_kernel"],
    "rms norm": kernels(tg.rms_norm, x, w)["norm_forward_kernel"],
    "layer norm": norm["norm_forward_kernel"],
    "layer norm backward": norm["norm_backward_kernel"],
    "attention": attention["attention_forward_kernel"],
    "attention backward: delta": attention["attention_backward_preprocess_kernel"],
    "attention backward: dk, dv": attention["attention_backward_dkdv_kernel"],
    "attention backward: dq": attention["attention_backward_dq_kernel"],
}
for name, launch in launches.items():
    print(f"{name:<28} {launch.name}")

# %%
# Compiling them for sm_90
# ------------------------
# The matmul and the three attention kernels get their stated configurations; the
# attention backward's delta kernel gets the rows per program its launcher picks on a GPU
# (64 at head_dim 128; it takes 16 under the interpreter, to run quickly).
# :func:`~triton_guide.compiled.compile_for` compiles each launch in a separate process,
# the way Triton's JIT would for these arguments, and reads the binary with ``cuobjdump``.
m, n, k, group, stages, warps = WAVE_TILE
launches["matmul"] = launches["matmul"].with_config(triton.Config(
    dict(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, GROUP_SIZE_M=group),
    num_stages=stages, num_warps=warps))
for name, table in [("attention", "forward"), ("attention backward: dk, dv", "dkdv"),
                    ("attention backward: dq", "dq")]:
    m, n, stages, warps = TUNED[table][128][0]
    launches[name] = launches[name].with_config(triton.Config(
        dict(BLOCK_M=m, BLOCK_N=n), num_stages=stages, num_warps=warps))
launches["attention backward: delta"] = launches["attention backward: delta"].replaced(BLOCK_M=64)
results = dict(zip(launches, compiled.compile_for(list(launches.values()), capability=90)))
print(f"compiled for {results['matmul'].target} by triton {triton.__version__}\n")
print(compiled.summary(results))

# %%
# What fits on an SM
# ------------------
# An SM keeps every program it runs resident at once: their registers, their shared
# memory, their threads. Whichever runs out first caps the programs per SM. Registers go
# to a warp in blocks of 256, shared memory to a program in blocks of 128 bytes plus 1 KiB
# the system keeps per program. Fewer programs per SM means fewer warps to switch to
# while one waits on memory; the tensor-core kernels make up for it with asynchronous
# copies and products, the memory-bound ones with many warps in flight.
sm = compiled.HOPPER
print(f"{sm.name}: {sm.registers} registers, {sm.threads} threads, {sm.programs} programs "
      f"and {sm.shared // 1024} KiB of shared memory per SM; at most {sm.thread_registers} "
      "registers per thread\n")
for name in ["layer norm", "layer norm backward", "matmul"]:
    r = results[name]
    fit = r.occupancy()
    warp_registers = -(-r.registers * 32 // sm.register_unit) * sm.register_unit
    print(f"{name}: {r.registers} registers x 32 threads = {warp_registers} a warp, "
          f"{sm.registers // warp_registers} warps, {r.num_warps} a program")
    print(f"  registers allow {fit.limits['registers']}, {r.shared} bytes of shared memory "
          f"{fit.limits['shared']}, {r.num_warps * 32} threads {fit.limits['threads']}: "
          f"{fit.programs} per SM, {fit.warps} of its {sm.threads // 32} warps")

# %%
# What a spill looks like
# -----------------------
# When a thread needs more registers than it may have, ptxas keeps some values in
# local memory (off the chip, cached), storing them with ``STL`` and loading them back
# with ``LDL``; Triton's ``kernel.n_spills`` counts the 4-byte words each thread keeps
# there. The same attention tile on twice the warps gives each thread half the rows to
# hold.
spilling = [name for name, r in results.items() if r.spills]
print(f"kernels that spill: {', '.join(spilling) or 'none'}")
forward = launches["attention"]
variants = {warps: forward.with_config(triton.Config(
    {key: forward.kwargs[key] for key in ("BLOCK_M", "BLOCK_N")},
    num_stages=forward.kwargs["num_stages"], num_warps=warps)) for warps in (4, 8)}
for warps, r in zip(variants, compiled.compile_for(list(variants.values()))):
    traffic = compiled.spill_instructions(r.sass)
    print(f"attention {r.constexprs['BLOCK_M']}x{r.constexprs['BLOCK_N']} on {warps} warps: "
          f"{r.registers} registers, {r.spills} words spilled, {traffic['STL']} STL, "
          f"{traffic['LDL']} LDL; {r.occupancy().programs} program(s), "
          f"{r.occupancy().warps} warps per SM")
    stores = [line.split("*/")[1].split("/*")[0].strip() for line in r.sass.splitlines()
              if " STL" in line]
    print("  " + (stores[0] if stores else "no STL"))

# %%
# The inner loops
# ---------------
# The instructions that matter, counted in each kernel's busiest loop (the whole kernel,
# for those without a loop), from its PTX. The memory-bound kernels move 16 bytes per
# thread per load (``ld.global.v4``) and reduce across a warp with ``shfl.sync``; the
# matmul and attention loops are tensor-core products (``wgmma.mma_async``) fed by TMA
# copies (``cp.async.bulk.tensor``), each waited for on an ``mbarrier``.
# ``cp.async.ca`` is the older asynchronous copy, thread by thread from pointers.
kinds = ("wgmma.mma_async", "cp.async.bulk.tensor", "cp.async.ca", "mbarrier.try_wait",
         "ld.global.v4", "ld.global", "shfl.sync", "ex2.approx")
for name, r in results.items():
    print(f"{name:<28} {compiled.loop_summary(r, kinds)}")
for name in ["vector add", "matmul"]:
    print(f"\n{name}, one line of each named instruction of its loop:")
    print("\n".join("  " + line for line in compiled.excerpt(results[name].loop(), most=6)))

# %%
# Against the GPU's own compiled kernels
# --------------------------------------
# On a GPU, Triton's JIT compiles each launch for the GPU it runs on; its kernel says
# ``n_regs``, ``n_spills`` and ``metadata.shared``. This compares them with the numbers
# above.
if runtime.interpreting():
    print("No GPU in this build: the numbers above are the compiler's for sm_90, "
          "not read from a GPU.")
else:
    major, minor = torch.cuda.get_device_capability()
    print(f"{torch.cuda.get_device_name()} (sm_{major}{minor})")
    for name, launch in launches.items():
        gpu, ours = compiled.gpu_compiled(launch), results[name]
        same = (gpu["registers"], gpu["spills"], gpu["shared"]) == (
            ours.registers, ours.spills, ours.shared)
        print(f"{name:<28} registers {gpu['registers']:>3}, spills {gpu['spills']:>3}, "
              f"shared {gpu['shared']:>6}: {'the same' if same else 'DIFFERENT'}")
