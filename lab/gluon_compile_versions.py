"""Compile triton_guide.gluon_matmul's kernels for sm_90 (no GPU) with the installed Triton
and with the GPU image's Triton 3.6 where an unpacked copy is given, and print what the
compiler made: registers, spills, shared memory, and instruction counts of the whole kernel
and of its main loop (PTX), plus the machine code's HGMMA and UTMA instructions.

    PYTHONPATH=$PWD python lab/gluon_compile_versions.py [/tmp/t36site ...]
"""

import sys
from collections import Counter

from triton_guide import compiled as tools
from triton_guide import gluon_matmul as gm

KINDS = ("wgmma.mma_async", "cp.async.bulk.tensor", "mbarrier.try_wait", "bar.sync",
         "ld.global.v4", "st.global.v4", "ld.local", "st.local")

for path in [None, *sys.argv[1:]]:
    for k in gm.compile_for_sm90(python_path=path):
        whole = tools.instruction_counts(k.ptx.splitlines())
        loop = tools.instruction_counts(tools.inner_loop(k.ptx))
        sass = Counter(op.split(".")[0] for op in tools.sass_opcodes(k.sass))
        print(f"triton {k.triton_version} | {k.name}: {k.registers} registers, {k.spills} "
              f"spills, {k.shared} B shared, {k.num_warps} warps; "
              f"{len(tools.sass_opcodes(k.sass))} SASS instructions")
        print("  PTX whole kernel: " + ", ".join(f"{n} x{whole[n]}" for n in KINDS if whole[n]))
        print("  PTX main loop:    " + ", ".join(f"{n} x{loop[n]}" for n in KINDS if loop[n])
              + f" ({sum(tools.opcode(l) is not None for l in tools.inner_loop(k.ptx))} "
              "instructions)")
        print("  SASS: " + ", ".join(f"{n} x{sass[n]}" for n in ("HGMMA", "UTMALDG", "UTMASTG",
                                                                  "SYNCS", "BAR", "LDG", "STG")
                                     if sass[n]))

# For comparison: triton_guide.matmul's descriptor kernel (Triton's own pipeliner) at the
# same tiles, compiled for sm_90 with the installed Triton.
import importlib  # noqa: E402

import torch  # noqa: E402

import triton_guide as tg  # noqa: E402

matmul = importlib.import_module("triton_guide.matmul")
(launch,) = tools.record_launches(tg.matmul, *[torch.randn(4096, 4096, dtype=torch.float16)] * 2)
hook = launch.configs[0].pre_hook
tiles = [(128, 256, 64, 8, 3, 8), (128, 128, 64, 8, 4, 4), (128, 128, 64, 8, 3, 4)]
results = tools.compile_for([launch.with_config(matmul._config(*t, pre_hook=hook)) for t in tiles])
print("\ntriton_guide.matmul's matmul_tma_kernel (tl.dot, Triton's pipeliner), same tiles:")
print(tools.summary({f"{t[0]}x{t[1]}x{t[2]} s{t[4]} w{t[5]}": r for t, r in zip(tiles, results)}))
for t, r in zip(tiles, results):
    print(f"  {t[0]}x{t[1]}x{t[2]} s{t[4]} w{t[5]} main loop: {tools.loop_summary(r, KINDS)} "
          f"({sum(tools.opcode(line) is not None for line in r.loop())} instructions)")
