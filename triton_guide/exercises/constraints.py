"""The rules a right output can still break: no Triton kernel launched, work done with
PyTorch, a grid of fewer dimensions than asked, a float or a size passed as a
``tl.constexpr``, a tensor made on the CPU, the output changed after the kernel stored it,
an input copied or read more than once, an output stored more than once."""

from __future__ import annotations

from .cases import Case, CaseResult, plural
from .watch import Launch, Region, TorchCalls, Watch

# An output with more columns than this needs more than one tile across (blocks of up to
# 2048 columns): a 2-D grid's second dimension must exceed 1 there.
WIDE_OUTPUT_COLUMNS = 2048


def _grid_below(case: Case, launches: list[Launch], grid_dims: int) -> CaseResult | None:
    """The failure, if a launch's grid has fewer than ``grid_dims`` dimensions, or (on an
    output too wide for one block of columns) a second dimension of 1."""
    asked = (f"the exercise asks for a {grid_dims}-D grid of tiles: tl.program_id(0) "
             "numbers a tile's rows and tl.program_id(1) its columns, so that no program "
             "finds its tile by dividing one id")
    columns = case.arguments[case.output_name].shape[-1]
    for launch in launches:
        if launch.grid is None:
            continue
        if len(launch.grid) < grid_dims:
            return CaseResult(case, False, f"launched a {len(launch.grid)}-D grid", [
                f"{launch.kernel} was launched on the grid {launch.grid}; {asked}."])
        if columns > WIDE_OUTPUT_COLUMNS and launch.grid[1] == 1:
            return CaseResult(case, False, "launched one column of tiles", [
                f"{launch.kernel} was launched on the grid {launch.grid}, one program along "
                f"the second axis for {columns} columns, more than any block of columns "
                f"holds; {asked}."])
    return None


def made_on_cpu(case: Case, watch: Watch, torch_calls: TorchCalls) -> CaseResult | None:
    """The failure, if a kernel received a tensor that solve made without ``device=``: it
    is on the CPU, which the interpreter runs on, but a GPU's kernel cannot read it."""
    for tensor, function, line in torch_calls.made_on_cpu:
        if any(tensor is launched for launched in watch.launched_tensors):
            return CaseResult(case, False, f"passed a kernel a tensor made without device= "
                              f"({function})", [
                f"solve makes a tensor with torch.{function}(...) at line {line} of your "
                "file, without device=, and passes it to a kernel. Without device= PyTorch "
                "puts it in the CPU's memory: the interpreter runs there, so it works here, "
                "but on a GPU the launch fails (\"Pointer argument cannot be accessed from "
                "Triton\"). Give it the inputs' device: device=x.device, or "
                "torch.empty_like(x)."])
    return None


def _torch_work(case: Case, found: list[tuple[str, str, int]]) -> CaseResult | None:
    """The failure, if solve computed something from an input with PyTorch (``found``:
    ``(input, function, line)`` from :class:`TorchCalls`), whatever the kernel did with it."""
    if not found:
        return None
    name, function, line = found[0]
    more = f" (and {plural(len(found) - 1, 'more call')})" if len(found) > 1 else ""
    return CaseResult(case, False, f"computed from {name} with PyTorch ({function})", [
        f"solve calls {function} on {name} at line {line} of your file{more}: PyTorch, not "
        "your kernel, does that part of the work. The exercise is to compute everything in "
        "the kernel from the inputs as they are; solve only allocates, reads shapes and "
        "strides, and launches. Each PyTorch step is also a whole pass over memory that the "
        "kernel would not need."])


def broken_constraint(case: Case, watch: Watch, regions: list[Region],
                       grid_dims: int | None = None,
                       torch_calls: list[tuple[str, str, int]] = ()) -> CaseResult | None:
    """The failure, if a right output came about in a way the exercise rules out;
    ``grid_dims``, the dimensions the statement asks every grid to have; ``torch_calls``,
    the PyTorch calls solve made on an input (:class:`TorchCalls`)."""
    if not watch.launches:
        return CaseResult(case, False, "launched no Triton kernel", [
            f"solve computed {case.output_name} without launching a Triton kernel: the "
            "exercise is to write the kernel that computes it."])
    torch_work = _torch_work(case, list(torch_calls))
    if torch_work is not None:
        return torch_work
    if grid_dims is not None:
        flat = _grid_below(case, watch.launches, grid_dims)
        if flat is not None:
            return flat
    floats = {name: value for name, value in case.inputs().items() if isinstance(value, float)}
    # The sizes (n, M, N, K): a kernel parameter of the same name that is a tl.constexpr
    # makes every new size a new compilation.
    sizes = {name: value for name, value in case.inputs().items()
             if isinstance(value, int) and not isinstance(value, bool)}
    for launch in watch.launches:
        for parameter, value in launch.constexprs.items():
            if isinstance(value, float) and value in floats.values():
                return CaseResult(case, False, f"took a float as tl.constexpr {parameter}", [
                    f"{launch.kernel} takes {parameter} as a tl.constexpr: every new value "
                    "compiles a new kernel. Pass it as an ordinary argument."])
            # Under another name too: a block size is a power of two, a size here need not be.
            renamed = (isinstance(value, int) and not isinstance(value, bool)
                       and value & (value - 1) != 0 and value in sizes.values())
            if (parameter in sizes and value == sizes[parameter]) or renamed:
                return CaseResult(case, False, f"took the size {parameter} as tl.constexpr", [
                    f"{launch.kernel} takes {parameter} as a tl.constexpr: every new size "
                    "compiles a new kernel. Pass it as an ordinary argument and mask "
                    "against it; only block sizes need to be tl.constexpr."])
    if not watch.memory:  # what follows needs the addresses watched
        return None
    output = next(region for region in regions if region.name == case.output_name)
    if not output.written:
        return CaseResult(case, False, f"no kernel stored into {case.output_name}", [
            f"{case.output_name} holds the right values, but no Triton kernel stored into it: "
            "solve computed them with PyTorch (from the kernel's results, or instead of "
            "them). The exercise is to compute them in the kernel."])
    changed = int((output.changed_since_stored() & output.is_element).sum())
    if changed:
        return CaseResult(case, False, f"changed {case.output_name} after a kernel stored it", [
            f"{plural(changed, 'element')} of {case.output_name} hold other values than a "
            "kernel last stored there: solve changed them with PyTorch after the launch. The "
            "exercise is to compute them in the kernel."])
    if output.writes is not None and output.writes.max() > 1:
        twice = int((output.writes > 1).sum())
        return CaseResult(case, False, f"stored into {case.output_name} more than once", [
            f"{plural(twice, 'element')} of {case.output_name} stored more than once (up to "
            f"{int(output.writes.max())} times): the exercise asks each element to be "
            "computed once and stored once. Do two programs, or two passes of a loop, "
            "compute the same part of the output?"])
    for region in regions:
        if region.name == case.output_name:
            continue
        if not region.read:
            return CaseResult(case, False, f"never read {region.name} itself", [
                f"No kernel read {region.name}: solve gave them a copy of it, or a tensor "
                f"computed from it with PyTorch (such as {region.name}.contiguous() or "
                f"2 * {region.name}). Pass {region.name} as it is, with its strides, and "
                "compute in the kernel: each PyTorch step is a whole extra pass over "
                "memory."])
        if region.reads is not None and region.reads.max() > 1:
            twice = int((region.reads > 1).sum())
            return CaseResult(case, False, f"read {region.name} more than once", [
                f"{plural(twice, 'element')} of {region.name} read more than once (up to "
                f"{int(region.reads.max())} times): the exercise asks for one pass."])
    return None


