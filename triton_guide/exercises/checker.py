"""Checking a reader's ``solve`` against an exercise's torch reference, one named case at a time.

Every case builds fresh inputs from a seed, calls ``solve`` with them and compares the output
with the reference computed in float64. The checker sets traps that a plain
``torch.allclose`` would miss:

* outputs arrive filled with NaN (with a payload of the checker's own), so an element the
  kernel never writes shows up, and is told apart from a NaN the kernel computed;
* every tensor sits inside a larger buffer with margins before and after it (and, for a
  strided view, gaps between its elements);
* inputs are compared after the call, so a kernel that writes into its input is caught;
* a ``solve`` that launches no Triton kernel, passes a float argument or a size (``n``,
  ``M``...) to one as a ``tl.constexpr``, or computes from an input with PyTorch
  (``x.amax(dim=1)``, ``alpha * x``: anything but shapes, strides, views and allocations)
  fails even when its output is right; so does one that hands a kernel a tensor it made
  without ``device=`` (on the CPU, where the interpreter runs, and no GPU kernel can read).

In the Triton interpreter (no GPU) the checker also sees every address a kernel touches
(:mod:`triton_guide.exercises.watch`): an access off the elements of the tensors, even one
whose value is thrown away, fails the case, and an access far outside every tensor is
switched off before it happens, so that no kernel can scribble on the checker's own
memory. The masked-off lanes of a load without ``other=`` read NaN (and, in further runs of
a case that passed, ``3e38`` and ``-3e38``, which a maximum or a minimum does not skip),
the programs of a launch run in reverse order, an element one program stores and another
touches in the same launch is reported as a race, and a copy of an input
(``x.contiguous()``) is noticed because the kernels never read the input itself. The
interpreter runs a kernel's Python without compiling it, so it accepts kernels a GPU's
compiler refuses; each case that passes also compiles, for an H100, the kernels of
``solve``'s file as that case launched them, launch options included (each distinct launch
once per check, in a separate process: :func:`triton_guide.debugging.compile_kernels`),
and fails if one does not compile or needs more shared memory or warps a program than an
H100 has. The interpreter also rounds the float32 operands of ``tl.dot`` to tf32, as a
GPU's tensor cores do, unless the exercise asks for ``tl.dot`` (``EXACT_DOT``).

On a GPU the checker sees only what lands in memory: a store past the end shows in the
output's margins, and an unmasked load past an input's end reads its margin, filled first
with NaN and then, in a second run of the case, with ``3e38`` (a maximum ignores NaN). A
load whose value is thrown away, a load without ``other=``, a copy of an input, races, and
the order of the programs are not checked there.

Once every case passes, the dry cases (:func:`largest`) call ``solve`` at the statement's
largest sizes on meta tensors, which have shapes and no data, recording its launches
without running them: each grid must fit a GPU's limits and each kernel must compile for an
H100 as launched (a block sized to the whole input passes every smaller case and fails
there).

A report names every case with PASS or FAIL as it finishes and, for the first failing one,
the arguments (shapes, strides, scalars) and the first wrong positions with the expected
and actual values.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Callable

import torch

from .. import runtime
from ..debugging import Compiled
from .cases import Case, CaseResult, Output, Report, plural
from .compare import compare
from .compiling import dry_run, gpu_compile_failure, source_file
from .constraints import broken_constraint, made_on_cpu
from .placement import (INPUT_MARGIN_BITS, LARGE_MARGIN_FILL, Placed, contiguous_strides,
                        margin_writes, place)
from .watch import Region, TorchCalls, Watch

# Whether the kernels' addresses are watched (see the module docstring); tests switch it off
# to check what a GPU run sees.
WATCH_MEMORY = runtime.interpreting()


class SolveNotFound(Exception):
    """The file to check could not be loaded, or defines no callable ``solve``."""


def load_solve(path: str | os.PathLike) -> Callable:
    """Import the Python file at ``path`` and return its ``solve`` function."""
    path = Path(path)
    if not path.is_file():
        raise SolveNotFound(f"no file at {path}: give the path of a .py file that defines solve")
    module_name = f"_triton_guide_solve_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise SolveNotFound(f"{path} cannot be imported: is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    # Registered as an import would be, for code in the file that looks its module up.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise SolveNotFound(
            f"importing {path} failed: {type(error).__name__}: {error}\n"
            + "".join(traceback.format_exc(limit=-3))
        ) from error
    solve = getattr(module, "solve", None)
    if not callable(solve):
        raise SolveNotFound(f"{path} defines no function named solve: start from the stub")
    return solve


def new_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def check(exercise, solve: Callable, *, seed: int | None = None, only: str | None = None,
          progress: Callable[[str], None] | None = None) -> Report:
    """Run ``solve`` on every case of ``exercise`` (an :class:`~triton_guide.exercises.Exercise`).

    ``seed`` fixes every input (and the sizes of the random cases); by default a fresh one is
    drawn, and the report prints it so that a failure can be replayed. ``only`` names the
    one case to run (``KeyError`` if there is none of that name). ``progress``, if given,
    receives each line of the report as soon as it is known: the verdict of a case as the
    case finishes.
    """
    seed = new_seed() if seed is None else seed
    cases = exercise.all_cases(torch.Generator().manual_seed(seed))
    if only is not None:
        names = [case.name for case in cases]
        if only not in names:
            raise KeyError(f"{exercise.name} has no case named {only!r}; its cases are: "
                           f"{', '.join(names)}")
        cases = [cases[names.index(only)]]
    report = Report(exercise.name, seed, len(cases), max(len(case.name) for case in cases))
    emit = progress or (lambda line: None)
    for line in report.header():
        emit(line)
    compiled: dict[tuple, Compiled] = {}  # each distinct launch compiled for a GPU, once
    for case in cases:
        if case.dry and not report.passed:
            left = len(cases) - len(report.results)
            report.stopped = (f"The {plural(left, 'dry case')} at the statement's largest sizes "
                              "did not run (dry cases run once every other case passes).")
            break
        if case.dry:
            result = dry_run(solve, case, compiled)
            report.results.append(result)
            emit(report.line(result))
            continue
        result = _run_case(exercise, solve, case, INPUT_MARGIN_BITS)
        for fill in UNDEFINED_FILLS if result.passed and result.undefined_read else ():
            again = _run_case(exercise, solve, case, INPUT_MARGIN_BITS, undefined=fill)
            if not again.passed:
                again.details.insert(0, f"With the masked-off lanes of loads without other= "
                                        f"reading {fill:g} instead of NaN (which tl.max and "
                                        "tl.min skip): does a masked load need other=?")
                result = again
                break
        if result.passed and not WATCH_MEMORY:
            again = _run_case(exercise, solve, case, LARGE_MARGIN_FILL)
            if not again.passed:
                again.details.insert(0, f"With the inputs' margins filled with "
                                        f"{LARGE_MARGIN_FILL:g} instead of NaN (which a "
                                        "maximum ignores): a load past the end of an input?")
                result = again
        if result.passed and runtime.interpreting():
            result = gpu_compile_failure(case, solve, result.launches, compiled) or result
        report.results.append(result)
        emit(report.line(result))
        left = len(cases) - len(report.results)
        if left and any(sign in result.error for sign in CONTEXT_LOST):
            report.stopped = (
                f"The GPU reported an error that leaves this process's CUDA context unusable, "
                f"so the other {plural(left, 'case')} were not run (each would report the "
                "same error). Check again in a new process; in the interpreter "
                "(TRITON_INTERPRET=1) the checker names the access that went astray.")
            break
    missing = {c.message for c in compiled.values() if not c.found}
    report.notes.extend(f"not compiled for a GPU: {message}" for message in sorted(missing))
    for line in report.footer():
        emit(line)
    return report


# What an access off the elements of a tensor means, by where it lands.
_STRAY_HINTS = {
    "outside every tensor": "Far from every tensor the kernel received (the checker "
    "switched those lanes off): offsets computed with the wrong strides, or strides passed "
    "in the wrong order? On a GPU such an access overwrites other memory or stops the "
    "program with an illegal address.",
    "past the end of": "Is a tl.load or tl.store missing its mask, is the mask wrong, or an "
    "offset computed with a wrong stride? On a GPU those lanes touch another tensor's "
    "memory, even when the value is not used.",
    "before the start of": "Is an offset negative, or a stride wrong?",
    "between the elements of": "The tensor is a strided view, with gaps between its rows or "
    "columns: address it through its strides, never through its shape.",
}


def _lines_in(filename: str | None, error: BaseException) -> list[str]:
    """The lines of ``filename`` (the reader's file) in the tracebacks of ``error`` and of
    the exceptions it was raised from: the interpreter raises its own error from the one
    a kernel line raised, and the end of the traceback shows only Triton's frames."""
    if filename is None:
        return []
    lines, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        for frame in traceback.extract_tb(error.__traceback__):
            if frame.filename == filename:
                lines.append(f"  {Path(filename).name}, line {frame.lineno}: {frame.line}")
        error = error.__cause__ or error.__context__
    return list(dict.fromkeys(lines))


def _stray_result(case: Case, strays) -> CaseResult:
    described = []
    for verb, where, name, count in strays:
        described.append(f"{verb} {plural(count, 'element')} {where}"
                         + (f" {name}" if name else ""))
    details = [f"solve {line}" for line in described]
    details.extend(_STRAY_HINTS[where] for where in dict.fromkeys(w for _, w, _, _ in strays))
    summary = described[0] + (f" (and {len(described) - 1} more)" if len(described) > 1 else "")
    return CaseResult(case, False, summary, details)


# What CUDA says of an error after which the process can launch nothing more on the GPU.
CONTEXT_LOST = ("illegal memory access", "illegal address", "unspecified launch failure",
                "device-side assert triggered", "misaligned address")

# What the masked-off lanes of a load without other= read in the further runs of a case
# (interpreter only): on a GPU they hold whatever the registers held, and NaN hides that
# from a maximum or a minimum.
UNDEFINED_FILLS = (3e38, -3e38)

# What a race on an element means, for the report.
_RACE_HINT = ("Programs run in no set order on a GPU: an element that one program stores "
              "and another reads, stores or adds into in the same launch can end up with "
              "either's value, or lose an update (a load, an add and a store into a shared "
              "total loses the additions of programs in between). If every element should "
              "have one owner, check the offsets first: two programs that compute the same "
              "offset (a wrong stride, a missing * BLOCK, the wrong program_id axis) store "
              "into each other's elements. If the elements are meant to be shared, update "
              "them only with tl.atomic_* (after zeroing them before the launch, not from a "
              "program).")


def _run_case(exercise, solve: Callable, case: Case, margin_fill: float | int,
              undefined: float | None = None) -> CaseResult:
    device = runtime.device()
    output_name = case.output_name
    placed: dict[str, Placed] = {}
    call_arguments = []
    for name, value in case.arguments.items():
        if isinstance(value, torch.Tensor):
            placed[name] = place(value.shape, value.stride(), device, value, margin_fill)
            call_arguments.append(placed[name].view)
        elif isinstance(value, Output):
            strides = value.strides or contiguous_strides(value.shape)
            placed[name] = place(value.shape, strides, device, None, margin_fill)
            call_arguments.append(placed[name].view)
        else:
            call_arguments.append(value)
    read_once, write_once = set(exercise.read_once), set(exercise.write_once)
    regions = [Region(name, p.view, p.buffer, count_reads=name in read_once,
                      count_writes=name in write_once) for name, p in placed.items()]

    returned, error = None, None
    inputs = [region for region in regions if region.name != output_name]
    with Watch(regions, memory=WATCH_MEMORY, undefined=undefined,
               tf32=not exercise.exact_dot) as watch, \
            TorchCalls(inputs, source_file(solve)) as torch_calls:
        try:
            with warnings.catch_warnings():
                # The interpreter computes with numpy, which warns on overflow (a wrong
                # kernel's exp(1e4)); the comparison below reports the result.
                warnings.simplefilter("ignore", RuntimeWarning)
                returned = solve(*call_arguments)
            if device.type == "cuda":
                torch.cuda.synchronize()
        except Exception as raised:
            error = raised
            tail = traceback.format_exc().rstrip().splitlines()[-12:]

    # Accesses off the tensors' elements come first: they explain an exception or a NaN.
    strays = watch.strays()
    if strays:
        return _stray_result(case, strays)
    races = watch.races()
    if races:
        described = [f"{plural(count, 'element')} of {name}" for name, count in races]
        return CaseResult(case, False, f"race on {' and '.join(described)}", [
            f"solve: {' and '.join(described)} stored by one program with tl.store and, in "
            "the same launch, read or updated by another, or stored by another with other "
            "values", _RACE_HINT])
    if error is not None:
        message = str(error).strip().splitlines()
        # The interpreter's message ends with the cause; CUDA's starts with it.
        first_line = (message[0] if message and message[0].startswith("CUDA error")
                      else message[-1] if message else "")
        yours = _lines_in(getattr(getattr(solve, "__code__", None), "co_filename", None), error)
        where = ["where in your file:", *yours] if yours else []
        if "active drivers" in str(error) and runtime.interpreting():
            where.append("triton.autotune times its configurations on a GPU, which the "
                         "interpreter has none of: check with one configuration (or a fixed "
                         "block size) on a CPU, and autotune on a GPU.")
        return CaseResult(case, False, f"solve raised {type(error).__name__}: {first_line}"[:160],
                          [*where, "the end of the traceback:", *tail], error=str(error))

    # Stores past either end of the output: the classic missing mask.
    before, after = margin_writes(placed[output_name])
    if before or after:
        where = []
        if after:
            where.append(f"{plural(after, 'element')} past the end")
        if before:
            where.append(f"{plural(before, 'element')} before the start")
        return CaseResult(case, False, f"wrote {' and '.join(where)} of {output_name}", [
            f"solve stored {' and '.join(where)} of {output_name}:",
            "is a tl.store missing its mask, or are offsets computed with the wrong stride?"])

    for name, value in case.arguments.items():
        if isinstance(value, torch.Tensor) and not torch.equal(
            placed[name].view.cpu().nan_to_num(7.0), value.nan_to_num(7.0)
        ):
            return CaseResult(case, False, f"changed the input {name}", [
                f"solve modified its input {name}: write only to {output_name}"])

    # Whether a kernel stored into the output at all, where the checker can see it.
    stored = next(r.written for r in regions if r.name == output_name) if WATCH_MEMORY else None
    wrong = compare(exercise, case, placed[output_name].view, returned, stored,
                     watch.undefined_read, watch.tf32_dots)
    if wrong is not None:
        return wrong
    # The exercise's own rules on what solve launched: those on the launches alone (the
    # grid) come before the general rules, which they explain; those on which program
    # stored what (interpreter only) after them.
    rules = exercise.launch_rules
    broken = made_on_cpu(case, watch, torch_calls) or (
        rules(case, watch.launches, None) if rules and watch.launches else None) or \
        broken_constraint(case, watch, regions, exercise.grid_dims, torch_calls.found)
    if broken is None and rules is not None and WATCH_MEMORY:
        output = next(region for region in regions if region.name == output_name)
        broken = rules(case, watch.launches, output.stored_by())
    if broken is not None:
        return broken
    return CaseResult(case, True, case.shapes(), undefined_read=watch.undefined_read,
                      launches=watch.launches)
