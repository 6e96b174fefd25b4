"""
Debugging a kernel
==================

A kernel that is wrong rarely says so: it writes plausible numbers, or leaves a few
elements untouched, or fails to compile with a message about a line you did not expect.
This page collects the ways to look inside, each run here.

You will learn:

* to shrink the input until every value fits on the screen, and to check the grid;
* to step through a kernel in the interpreter with plain Python tools;
* ``tl.static_print`` / ``tl.static_assert`` (compile time) against
  ``tl.device_print`` / ``tl.device_assert`` (run time), and what each prints in the
  interpreter and on a GPU;
* to poison an output with NaN so that unwritten elements show;
* to read the three compile errors learners meet first.
"""

# %%
# Where this page ran
# -------------------
# The kernels run on a GPU, or in the Triton interpreter on the CPU when there is none;
# several cells below print differently in the two, and this line says which ran here.
# ``triton_guide`` makes that choice when it is imported.

import inspect
import re
import traceback
import warnings
from pathlib import Path

import torch
import triton
import triton.language as tl

from triton_guide import runtime, vector_add, vector_add_reference
from triton_guide.debugging import (
    capture_output,
    checked_sqrt,
    checked_sqrt_kernel,
    compile_kernels,
    interpreted,
    run_python,
    trace_kernel,
)
from triton_guide.testing import assert_close
from triton_guide.vector_add import vector_add_kernel

print(runtime.describe())
device = runtime.device()
torch.manual_seed(0)

# %%
# Shrink the input, check the grid
# --------------------------------
# A bug seen in a million outputs is a statistic; seen in ten it is a pattern. Take the
# smallest input that still has every feature of the real one: here, a length that is
# not a multiple of the block, so the last program is partial. Then check the grid
# before anything runs: enough programs to cover every element, and how many lanes the
# mask must switch off.

n, block_size = 10, 4
grid = (triton.cdiv(n, block_size),)
lanes = grid[0] * block_size
print(f"n = {n}, BLOCK_SIZE = {block_size}: grid = {grid}, {lanes} lanes, "
      f"{lanes - n} masked off in the last program")
assert lanes >= n > lanes - block_size, "the grid does not cover n exactly once"
x = torch.arange(n, dtype=torch.float32, device=device)
y = torch.full((n,), 100.0, device=device)
print("x + y =", vector_add(x, y, block_size=block_size).tolist())

# %%
# Step through a kernel in the interpreter
# ----------------------------------------
# With ``TRITON_INTERPRET=1`` a kernel is ordinary Python run once per program, so
# ordinary Python tools work inside it: ``print``, ``breakpoint()`` (then ``p offsets``
# at the pdb prompt), a debugger in your editor. Turn it on for one run of your own
# script from the shell, before Python starts (Triton reads it when a kernel is
# defined, so setting it later in the script is too late):
#
# .. code-block:: bash
#
#    TRITON_INTERPRET=1 python my_kernel.py
#
# A page cannot type at a pdb prompt, so
# here ``sys.settrace`` does the stepping: :func:`~triton_guide.debugging.trace_kernel`
# records every line each program runs and the variables that line assigned.
# :func:`~triton_guide.debugging.interpreted` gives the interpreted kernel even on a GPU
# machine, so this cell prints the same thing everywhere.
#
# .. dropdown:: How ``trace_kernel`` steps through a kernel
#
#    .. literalinclude:: /../triton_guide/debugging.py
#       :pyobject: trace_kernel


def shown(value: object) -> object:
    """A traced value as a number or a list."""
    return value.tolist() if hasattr(value, "tolist") else value


out = torch.empty(n)
steps = trace_kernel(
    vector_add_kernel,
    lambda: interpreted(vector_add_kernel)[grid](
        x.cpu(), y.cpu(), out, n, BLOCK_SIZE=block_size),
)
last_program = grid[0] - 1
program_steps = [s for s in steps if s.call == last_program]
first = program_steps[0]
arguments = {name: shown(value) for name, value in first.values.items()
             if name not in first.assigned and not name.endswith("_ptr")}
print(f"{len(steps)} lines executed by {grid[0]} programs; program {last_program}, "
      f"called with {arguments}:")
for step in program_steps:
    print(f"  line {step.line}: {step.source}")
    for name in step.assigned:
        print(f"      -> {name} = {shown(step.values[name])}")
print("out =", out.tolist())

# %%
# Masked-off lanes of a load without ``other=`` read as 0 in the interpreter (the last
# two lanes of ``x`` and ``y`` above). On a GPU their value is undefined: never read
# them.

# %%
# Poison the output
# -----------------
# ``torch.empty`` returns whatever the memory held, which can look like an answer. Fill
# the output with NaN first: every element the kernel should have written and did not
# stays NaN, and one ``isnan`` counts them. Here is a launch with a **deliberately wrong
# grid**, ``n // BLOCK_SIZE`` programs (rounded down), next to the right one:

for label, programs in (("n // BLOCK_SIZE (wrong)", n // block_size),
                        ("cdiv(n, BLOCK_SIZE)", triton.cdiv(n, block_size))):
    poisoned = torch.full((n,), float("nan"), device=device)
    vector_add_kernel[(programs,)](x, y, poisoned, n, BLOCK_SIZE=block_size)
    unwritten = torch.isnan(poisoned).nonzero().flatten().tolist()
    print(f"grid {label:<24} = {programs}: unwritten elements {unwritten}")
assert_close(poisoned, vector_add_reference(x.double(), y.double()), rtol=1e-6)

# %%
# Compile time: ``tl.static_print`` and ``tl.static_assert``
# ----------------------------------------------------------
# Some values are known while the kernel is compiled: ``tl.constexpr`` arguments,
# shapes, dtypes. ``tl.static_print`` prints them and ``tl.static_assert`` stops the
# compilation when a condition on them fails. The package's ``checked_sqrt_kernel`` uses
# both, and the run-time aids below:
#
# .. literalinclude:: /../triton_guide/debugging.py
#    :pyobject: checked_sqrt_kernel
#
# Compiled, the kernel body is traced once per compiled variant, and Triton compiles a
# variant for each new combination of constexpr values, argument dtypes, the
# specialisations it makes on its own (an integer argument divisible by 16, or equal to
# 1, for instance) and launch options such as ``num_warps``. A static print appears
# once per variant, and not at all when the variant comes from the cache. The
# interpreter has no compile step: it runs the whole body, static print included, once
# per program.
# :func:`~triton_guide.debugging.compile_kernels` compiles for an H100 without
# launching, which works on any machine (Triton ships the CUDA assembler), so both can
# be shown here:

values = torch.tensor([0.0, 1.0, 4.0, 9.0, 16.0, 25.0], device=device)
SQRT_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "num_elements": "i32",
                  "BLOCK_SIZE": "constexpr", "VERBOSE": "constexpr"}
compiled, too_large = compile_kernels([
    (checked_sqrt_kernel, SQRT_SIGNATURE, {"BLOCK_SIZE": 4, "VERBOSE": True}),
    (checked_sqrt_kernel, SQRT_SIGNATURE, {"BLOCK_SIZE": 16384, "VERBOSE": False}),
])
static_lines = compiled.printed.splitlines()
print(f"compiled for an H100: static_print printed {len(static_lines)} line(s): "
      f"{static_lines}; {compiled.ptx_lines} lines of PTX")


def file_line(kernel, message: str) -> str:
    """Where the compiler's "at LINE:COLUMN" is in the kernel's file: LINE counts the
    kernel's def line as 1."""
    at = re.search(r"^at (\d+):(\d+):", message.strip(), re.MULTILINE)
    source, start = inspect.getsourcelines(kernel.fn)
    def_line = start + next(i for i, line in enumerate(source)
                            if line.lstrip().startswith("def "))
    file = Path(inspect.getsourcefile(kernel.fn)).name
    return (f"at {at[1]}:{at[2]}: the def is {file} line {def_line}, so this is line "
            f"{def_line} + {at[1]} - 1 = {def_line + int(at[1]) - 1}")


def first_lines(message: str, count: int = 6) -> str:
    """The first lines of an error message, and for a compiler error the part that
    matters: where, the offending line with its caret, and the message after it."""
    lines = [line for line in message.splitlines() if line.strip()]
    carets = [i for i, line in enumerate(lines) if line.strip() == "^"]
    if carets:
        caret = carets[0]
        lines = [lines[0], lines[caret - 1], lines[caret]] + lines[caret + 1:]
    return "\n    ".join(lines[:count])


# %%
# A failing ``tl.static_assert``: ``BLOCK_SIZE = 16384`` is over the kernel's limit.
# The compiler's ``at LINE:COLUMN`` counts lines from the kernel's ``def`` line; the
# line in parentheses finds it in the file.

print(f"compiler: {too_large.error_type}:\n    {first_lines(too_large.message)}")
print(f"    ({file_line(checked_sqrt_kernel, too_large.message)})")
try:
    checked_sqrt_kernel[(1,)](values, values, 6, BLOCK_SIZE=16384, VERBOSE=False)
except Exception as error:
    mode = "interpreter" if runtime.interpreting() else "launch"
    print(f"{mode}: {type(error).__name__}:\n    {first_lines(str(error))}")

# %%
# Run time: ``tl.device_print``
# -----------------------------
# ``tl.device_print`` prints values while the kernel runs. On a GPU every *thread*
# prints each element it holds, one line per element, tagged with the program id and the
# element index, in whatever order the threads reach it. A program runs ``num_warps``
# warps of 32 threads; a block of 4 lanes is smaller than that, so several threads hold
# copies of one element, and on a GPU each copy prints: there the count column below
# shows repeats, which say nothing about the kernel. The text goes through the CUDA
# driver to the C-level standard output, which
# :func:`~triton_guide.debugging.capture_output` catches so that it shows on this page.
# The interpreter has no threads: ``tl.device_print`` is a Python ``print``, one line per
# program with the program id and the whole block, so there every line is printed once.
# The first cell's output, at the top of the page, says which of the two ran it; so
# does the first line printed here.

ran_on = "interpreter" if runtime.interpreting() else "GPU"
with capture_output() as printed:
    roots = checked_sqrt(values, block_size=4, verbose=True)
printed_lines = printed.text.splitlines()
device_lines = sorted(line for line in printed_lines if "x:" in line)
static_count = sum("compiling" in line for line in printed_lines)
distinct = sorted(set(device_lines))
print(f"{ran_on}: {len(device_lines)} device_print lines for {values.numel()} elements "
      f"in {triton.cdiv(values.numel(), 4)} programs of 4 lanes; {len(distinct)} distinct, "
      "each printed this many times:")
for line in distinct[:8]:
    print(f"    {device_lines.count(line):>3} x  {line.strip()}")
print(f"static_print lines during this launch: {static_count} "
      "(interpreter: one per program; GPU: one if it compiled now, none if cached)")
masked_lanes = triton.cdiv(values.numel(), 4) * 4 - values.numel()
print(f"lanes past the end of the input, all in the last program: {masked_lanes}, "
      "loaded with other=0.0")
print("sqrt:", roots.tolist())

# %%
# The 0s at the end of the last program's block are those masked-off lanes: the load
# gave them ``other=0.0``, and ``tl.device_print`` prints every lane of the block,
# masked or not. The store is masked, so they never reach the output: ``sqrt`` has one
# value per input element.

# %%
# Run time: ``tl.device_assert``
# ------------------------------
# ``tl.device_assert(condition, message)`` checks a block at run time, but only when the
# kernel is compiled in debug mode (``TRITON_DEBUG=1``, or ``debug=True`` in
# ``@triton.jit``); otherwise it compiles to nothing. The interpreter of this Triton
# version skips it even in debug mode, so where the interpreter ran this page, nothing
# below fails: each cell prints which mode ran it. Give ``checked_sqrt`` a negative
# number, first without debug mode:

negative = torch.tensor([4.0, -1.0, 9.0], device=device)
with warnings.catch_warnings():  # the interpreter's numpy warns about sqrt(-1)
    warnings.simplefilter("ignore", RuntimeWarning)
    result = checked_sqrt(negative)
skipped = "skipped" if runtime.interpreting() else "compiled out"
print(f"{ran_on}, no debug mode (device_assert {skipped}): no error raised; "
      f"output {result.tolist()}")

# %%
# Then with ``TRITON_DEBUG=1``, in a separate process, because on a GPU a failed device
# assert leaves the CUDA context unusable for the rest of the process. The cell prints
# the process's return code and the lines of its output that mention an assert or start
# with ``output``. On a GPU the assert fires: the threads that hold the negative element
# print an assertion line with the file and line of the ``tl.device_assert`` and the
# message given to it, which here names the kernel and states the condition. Then ``.tolist()``, which waits for
# the kernel, raises a PyTorch error about a CUDA "device-side assert", so the
# ``output`` line never prints and the return code is not 0. In the interpreter the
# assert is skipped: the process prints the NaN and returns 0.

SQRT_OF_MINUS_ONE = (
    "import torch\n"
    "from triton_guide import runtime\n"
    "from triton_guide.debugging import checked_sqrt\n"
    "x = torch.tensor([4.0, -1.0, 9.0], device=runtime.device())\n"
    "print('output', checked_sqrt(x).tolist(), flush=True)\n"
    "torch.cuda.synchronize() if torch.cuda.is_available() else None\n"
)


def show(title, finished):
    print(f"{title}: return code {finished.returncode}")
    for line in finished.output.splitlines():
        if "ssert" in line or line.startswith("output"):
            print("   ", line.strip()[:160])


show("TRITON_DEBUG=1, " + ("in the interpreter (device_assert skipped)"
                           if runtime.interpreting() else "on the GPU"),
     run_python(SQRT_OF_MINUS_ONE, env={"TRITON_DEBUG": "1"}))

# %%
# On a GPU machine, the same process with ``TRITON_INTERPRET=1`` as well shows what the
# interpreter does: it returns normally with a NaN. Where the interpreter ran this page,
# that is the run above, so it is not repeated. To check values under the interpreter,
# print them, or compare the output with the reference afterwards.

if runtime.interpreting():
    print("interpreter: TRITON_DEBUG=1 and TRITON_INTERPRET=1 is the run above; skipped")
else:
    show("TRITON_DEBUG=1 and TRITON_INTERPRET=1 (device_assert skipped)",
         run_python(SQRT_OF_MINUS_ONE, env={"TRITON_DEBUG": "1", "TRITON_INTERPRET": "1"}))

# %%
# Reading the common compile errors
# ---------------------------------
# Three kernels, each **deliberately wrong** in one way learners often are. For each,
# what running it says (the interpreter here, or the compiler when launched on a GPU),
# and what the compiler says when it compiles the kernel for an H100. The compiler
# points at the line and the column; the first lines are the useful ones. Its
# ``at LINE:COLUMN`` counts lines from the kernel's ``def`` line, which is line 1, not
# from the top of the file: each case below also prints the file line it means.


@triton.jit
def shape_mismatch_kernel(out_ptr):  # WRONG: adds blocks of 16 and 32 elements
    rows = tl.arange(0, 16)
    cols = tl.arange(0, 32)
    tl.store(out_ptr + rows, (rows + cols).to(tl.float32))


@triton.jit
def runtime_block_kernel(out_ptr, BLOCK_SIZE):  # WRONG: BLOCK_SIZE is not tl.constexpr
    offsets = tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, offsets.to(tl.float32))


@triton.jit
def arange_of_100_kernel(out_ptr):  # WRONG: tl.arange needs a power-of-two length
    offsets = tl.arange(0, 100)
    tl.store(out_ptr + offsets, offsets.to(tl.float32))


scratch = torch.zeros(128, device=device)
cases = [
    (shape_mismatch_kernel, (scratch,), {"out_ptr": "*fp32"}),
    (runtime_block_kernel, (scratch, 64), {"out_ptr": "*fp32", "BLOCK_SIZE": "i32"}),
    (arange_of_100_kernel, (scratch,), {"out_ptr": "*fp32"}),
]
compiler_says = compile_kernels([(kernel, signature, {})
                                 for kernel, _, signature in cases])
for (kernel, arguments, _), compiled in zip(cases, compiler_says):
    print(f"--- {kernel.__name__}")
    try:
        kernel[(1,)](*arguments)
        print("ran without an error")
    except Exception as error:
        mode = "interpreter" if runtime.interpreting() else "launch"
        print(f"{mode}: {type(error).__name__}: {first_lines(str(error), 1)}")
        # The interpreter raises its own error from the one the kernel's line raised: the
        # traceback of that first error ends in the kernel.
        cause, frames = error, []
        while cause is not None:
            frames += [frame for frame in traceback.extract_tb(cause.__traceback__)
                       if frame.name == kernel.__name__]
            cause = cause.__cause__
        for frame in frames[-1:]:
            print(f"    raised in {frame.name}, {Path(frame.filename).name} line "
                  f"{frame.lineno}: {frame.line}")
    print(f"compiler: {compiled.error_type}:\n    {first_lines(compiled.message)}")
    print(f"    ({file_line(kernel, compiled.message)})")

# %%
# The interpreter's message is one line and does not say where, but the Python
# traceback behind it does: the interpreter's error was raised from the error of the
# kernel's own line (``error.__cause__``), printed above as "raised in", with its line
# in the file. The compiler shows the line too, with a caret under the column, but
# numbers it from the kernel's ``def`` line; on a GPU, a launch compiles the kernel and
# raises that same error.

# %%
# Takeaways
# ---------
# * Shrink the input until it fits on the screen; check the grid covers it exactly once.
# * Under ``TRITON_INTERPRET=1`` a kernel is Python: ``print``, ``breakpoint()`` and
#   tracers work inside it.
# * ``static_print`` / ``static_assert`` run while compiling; ``device_print`` /
#   ``device_assert`` while running, the assert only in debug mode, and not at all in
#   this version's interpreter.
# * Poison outputs with NaN: unwritten elements then show.
# * Compile errors point at a line, counted from the kernel's ``def``, and a column:
#   read the first lines.
#
# Used here: :func:`triton_guide.vector_add`, :func:`triton_guide.vector_add_reference`,
# :func:`triton_guide.debugging.checked_sqrt`,
# :func:`triton_guide.debugging.trace_kernel`,
# :func:`triton_guide.debugging.interpreted`,
# :func:`triton_guide.debugging.capture_output`,
# :func:`triton_guide.debugging.compile_kernels`,
# :func:`triton_guide.debugging.run_python`, :func:`triton_guide.testing.assert_close`.
