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
