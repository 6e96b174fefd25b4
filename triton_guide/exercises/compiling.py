"""The checks that need a GPU's compiler, which the interpreter lacks: each kernel of a
passing case compiled for an H100 as the case launched it, and the dry cases at the
statement's largest sizes (:func:`dry_run`), whose launches are recorded on meta tensors,
checked against a GPU's grid limits and compiled, not run."""

from __future__ import annotations

import inspect
import os
import subprocess
import warnings
from typing import Callable

import torch

from .. import runtime
from ..debugging import Compiled, compile_kernels
from .cases import Case, CaseResult, Output
from .placement import contiguous_strides
from .watch import Launch, Watch

# The most programs a GPU launches along each axis of a grid.
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def source_file(function) -> str | None:
    try:
        return os.path.realpath(inspect.getsourcefile(function))
    except (TypeError, OSError):
        return None


# A block of this many elements or more is not something a program can hold; Triton's
# compiler takes minutes over one of 2**20 (its largest) before anything can fail.
HUGE_BLOCK = 2**17


def dry_run(solve: Callable, case: Case, compiled: dict) -> CaseResult:
    """Call ``solve`` on meta tensors shaped as ``case`` says, without running its kernels,
    then check each launch's grid and compile it (see :func:`largest`)."""
    arguments = []
    for value in case.arguments.values():
        if isinstance(value, Output):
            strides = value.strides or contiguous_strides(value.shape)
            value = torch.empty_strided(value.shape, strides, device="meta")
        elif isinstance(value, torch.Tensor):  # fresh, in case solve changes one in place
            value = torch.empty_strided(value.shape, value.stride(), device="meta")
        arguments.append(value)
    with Watch([], memory=False, dry=True, compile_dry=not runtime.interpreting()) as watch:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                solve(*arguments)
        except Exception as error:
            if "meta" not in str(error).lower() and "active drivers" not in str(error):
                return CaseResult(case, False, f"solve raised {type(error).__name__} at the "
                                  "statement's largest sizes", [
                    f"solve, called at the statement's largest sizes (on tensors without "
                    f"data), raised {type(error).__name__}: {str(error)[:300]}"])
            # Meta tensors hold no data: a solve that reads some (out.sum().item()) cannot
            # be tried this way. Not a fault of solve's.
            return CaseResult(case, True, f"{case.shapes()} (not tried: solve needs the data, "
                              f"{type(error).__name__})")
    if watch.autotuned:
        return CaseResult(case, True, f"{case.shapes()} (not tried: triton.autotune picks "
                          "its configuration by timing, which a dry run cannot)")
    for launch in watch.launches:
        grid = launch.grid or ()
        if any(size > limit for size, limit in zip(grid, GRID_LIMITS)):
            return CaseResult(case, False, f"grid {grid} too large for a GPU", [
                f"At this size {launch.kernel} launches a grid of {grid} programs. A GPU "
                f"launches at most 2**31 - 1 programs along axis 0 and {GRID_LIMITS[1]} along "
                "axes 1 and 2: put the longest count of programs on axis 0 "
                "(tl.program_id(0)), or have each program take several blocks."])
        huge = {name: value for name, value in launch.constexprs.items()
                if isinstance(value, int) and not isinstance(value, bool)
                and value >= HUGE_BLOCK}
        if huge:
            name, value = next(iter(huge.items()))
            return CaseResult(case, False, f"{launch.kernel} takes a block of {value} at this "
                              "size", [
                f"At this size {launch.kernel} gets {name}={value}: a block that grows with "
                "the input. A program's block lives in its registers, and one of "
                f"{HUGE_BLOCK} elements or more does not fit (Triton refuses blocks past "
                "2**20 elements, and compiles ones near that for minutes). Give the block a "
                "fixed size, a few hundred to a few thousand elements, and launch more "
                "programs, or loop over the input in blocks."])
    try:
        failure = gpu_compile_failure(case, solve, watch.launches, compiled,
                                       at="at the statement's largest sizes")
    except (subprocess.TimeoutExpired, RuntimeError) as error:
        return CaseResult(case, False, "compiling for a GPU at the statement's largest sizes "
                          "failed", [f"The compiler did not finish: {type(error).__name__}: "
                                     f"{str(error)[:300]}"])
    return failure or CaseResult(case, True, case.shapes())


def gpu_compile_failure(case: Case, solve: Callable, launches: list[Launch],
                         compiled: dict, at: str = "") -> CaseResult | None:
    """Compile for an H100 each kernel from ``solve``'s file as this case launched it, and
    fail the case if one does not compile: the interpreter runs a kernel without compiling
    it, so it lets through what a GPU's compiler refuses (an accumulator that changes type
    in a loop, ``tl.dot`` on tiles smaller than the GPU's instructions take). ``compiled``
    keeps each distinct launch's result across the cases of one check, so each compiles
    once."""
    source = source_file(solve)
    launched: dict[tuple, Launch] = {}
    for launch in launches:
        if launch.compile_as is None or source_file(launch.jitted.fn) != source:
            continue
        signature, constexprs = launch.compile_as
        key = (launch.kernel, tuple(signature.items()), tuple(sorted(constexprs.items())),
               tuple(sorted(launch.options.items())))
        launched.setdefault(key, launch)
    for key, launch in launched.items():
        if launch.native is not None:  # compiled already, on this GPU (a dry run)
            compiled[key] = launch.native
    new = [key for key in launched if key not in compiled]
    if new:
        results = compile_kernels([(launched[key].jitted, *launched[key].compile_as, [],
                                    launched[key].options) for key in new], whole_file=True)
        compiled.update(zip(new, results))
    for key, launch in launched.items():
        result = compiled[key]
        if result.found and result.error_type is not None:
            if at:
                return CaseResult(case, False, f"{launch.kernel} does not compile {at}", [
                    f"Compiled for an H100 as solve launches it {at}, {launch.kernel} "
                    "fails: the cases above are smaller than the statement allows.",
                    *_compiler_message(result), *_compile_hints(result)])
            return CaseResult(case, False, f"{launch.kernel} runs in the interpreter but does "
                              "not compile for a GPU", [
                f"Compiled for an H100 as this case launched it, {launch.kernel} fails. The "
                "interpreter runs a kernel's Python without compiling it, so it lets through "
                "what the GPU's compiler refuses; every launch on a GPU compiles first.",
                *_compiler_message(result), *_compile_hints(result)])
        too_large = _over_the_gpus_limits(launch, result)
        if too_large:
            return CaseResult(case, False, f"{launch.kernel} compiles but cannot launch on "
                              f"a GPU{' ' + at if at else ''}", [
                f"Compiled for an H100 with this case's argument types and launch options, "
                f"{launch.kernel} asks for more than one program may have there, and a "
                "launch would fail (out of resources). The interpreter has no such limits.",
                *too_large])
    return None


# What one program may use on an H100: shared memory (227 KiB, the most a block may opt
# into on compute capability 9.0) and threads (1024, so 32 warps of 32).
GPU_SHARED_MEMORY = 227 * 1024
GPU_MAX_WARPS = 32


def _over_the_gpus_limits(launch: Launch, result: Compiled) -> list[str]:
    """What about a compiled launch exceeds an H100's limits for one program, one line
    per limit; empty when it fits."""
    over = []
    warps = launch.options.get("num_warps", 4)
    if warps > GPU_MAX_WARPS:
        over.append(f"num_warps={warps} is {warps * 32} threads a program; a GPU runs at "
                    f"most {GPU_MAX_WARPS * 32} (num_warps={GPU_MAX_WARPS}). 4 or 8 warps "
                    "suit most kernels.")
    if result.found and result.shared > GPU_SHARED_MEMORY:
        stages = launch.options.get("num_stages")
        given = f"num_stages={stages}" if stages is not None else "Triton's default num_stages"
        over.append(f"It needs {result.shared / 1024:.0f} KiB of shared memory a program, "
                    f"with {given}; an H100 has {GPU_SHARED_MEMORY // 1024} KiB. Each "
                    "pipeline stage keeps another copy of the tiles a loop loads for tl.dot: "
                    "lower num_stages, or make those tiles smaller.")
    return over


def _compiler_message(result: Compiled, lines: int = 12) -> list[str]:
    """The compiler's message, the last ``lines`` lines (Triton ends with the line of the
    kernel at fault and the error), and its MLIR diagnostics."""
    message = [f"{result.error_type}:", *result.message.strip().splitlines()[-lines:]]
    if result.diagnostics:
        message += ["the compiler also said:", *result.diagnostics.splitlines()[:4]]
    return [f"  {line}" for line in message]


def _compile_hints(result: Compiled) -> list[str]:
    text = result.message + result.diagnostics
    hints = []
    if "Loop-carried variable" in text:
        hints.append("A variable changes type inside a loop: create it with the type it will "
                     "hold. tl.dot returns float32, so an accumulator that adds tl.dot's "
                     "results starts as tl.zeros(..., dtype=tl.float32); convert it when "
                     "storing (tl.store converts to the output's type).")
    if "num_warps must be a power of 2" in text:
        hints.append("Give num_warps a power of two: 1, 2, 4, 8, 16 or 32 (4 by default).")
    if "Input shapes should have" in text:
        hints.append("tl.dot on a GPU has a smallest tile, named in the message above: make "
                     "the blocks that feed tl.dot at least that large (16 on every side is "
                     "safe for every dtype).")
    return hints


