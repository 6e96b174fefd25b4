"""Comparing an output with the exercise's reference, in float64, and saying what a wrong
one most likely means: never stored (the checker's NaN), a NaN from an input's margin or a
masked-off lane, 16-bit or tf32 rounding, zeros that won a maximum."""

from __future__ import annotations

import torch

from ..testing import mismatches
from .cases import Case, CaseResult, plural
from .placement import INPUT_MARGIN_BITS, POISON_BITS, nan_bits
from .watch import UNDEFINED_BITS

# How many wrong positions a failure report lists.
SHOWN_POSITIONS = 5


def compare(exercise, case: Case, output: torch.Tensor, returned,
             stored: bool | None, undefined_read: bool = False,
             tf32_dots: int = 0) -> CaseResult | None:
    """The failure, if ``output`` differs from the reference; ``None`` if it matches.

    ``stored`` says whether a kernel stored into ``output`` (``None``: not known);
    ``undefined_read``, whether a load without ``other=`` had masked-off lanes;
    ``tf32_dots``, how many ``tl.dot`` calls had float32 operands rounded to tf32.
    """
    output_name = case.output_name
    reference_inputs = {k: v.double() if isinstance(v, torch.Tensor) else v
                        for k, v in case.inputs().items()}
    expected = exercise.reference(**reference_inputs)
    output = output.detach().cpu()
    bits = nan_bits(output)
    unwritten = bits == POISON_BITS
    actual = output.double()
    rtol, atol = exercise.tolerance(**reference_inputs)
    bad = mismatches(actual, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return None

    count, total = int(bad.sum()), bad.numel()
    never_written = int((bad & unwritten).sum())
    # Nothing of the output changed, and no kernel is known to have stored into it.
    nothing = bool(unwritten.all()) and stored is not True
    if nothing:
        summary = f"wrote nothing into {output_name}"
        if isinstance(returned, torch.Tensor):
            summary += " (solve returned a tensor instead)"
    else:
        summary = f"{count} of {total} elements of {output_name} wrong"
        if never_written:
            verb = "holds" if never_written == 1 else "hold"
            summary += f" ({never_written} still {verb} the checker's NaN)"
    details = [f"{count} of {total} elements of {output_name} differ beyond "
               f"rtol={rtol:g}, atol={atol:g}; the first wrong positions:"]
    notes = {POISON_BITS: "  (the checker's NaN)",
             INPUT_MARGIN_BITS: "  (the NaN around an input)",
             UNDEFINED_BITS: "  (the NaN of a masked-off lane)"}
    for position in bad.nonzero()[:SHOWN_POSITIONS].tolist():
        index = tuple(position)
        got, want = actual[index].item(), expected[index].item()
        note = notes.get(int(bits[index]), "")
        details.append(f"  {output_name}{list(index)}: expected {want:.7g}, got {got:.7g}{note}")

    if isinstance(returned, torch.Tensor):
        details.append(f"solve returned a tensor: write into the {output_name} you receive; "
                       "the checker ignores what solve returns.")
    elif nothing:
        details.append(f"Nothing stored into {output_name}: does solve pass the "
                       f"{output_name} it receives to the kernel, and launch any program? "
                       "Or is every lane of the store masked off (compare the mask with "
                       "the size, as in offsets < n)?")
    elif never_written:
        details.append("The checker's NaN: the element was never stored, or was computed "
                       f"from {output_name}'s\n  initial value (a tl.atomic_add adds to what "
                       "is there: zero it before the launch). Does the grid cover every "
                       "block? Is a store masked off? Do all programs compute the same "
                       "offsets (program_id(0) * BLOCK_SIZE missing, or the wrong "
                       "program_id axis)?")
    computed_nan = bad & actual.isnan() & ~unwritten & ~expected.isnan()
    if computed_nan.any():
        sources = set(bits[computed_nan].tolist())
        wrong_numbers = int((bad & ~actual.isnan()).sum())
        if UNDEFINED_BITS in sources and wrong_numbers:
            details.append(f"The NaN of a masked-off lane, and "
                           f"{plural(wrong_numbers, 'other wrong element')} that are "
                           "numbers, which other= alone would not fix. Give a masked "
                           "load without other= a value that changes nothing, and check "
                           "where values land: a masked-off lane reaches a kept "
                           "position when the tile is built the wrong way round "
                           "([:, None] and [None, :] swapped), an offset uses the "
                           "wrong stride, or a load's mask is narrower than the store's "
                           "(compared with the wrong size).")
        elif UNDEFINED_BITS in sources:
            details.append("The NaN of a masked-off lane: a tl.load with a mask and no "
                           "other= leaves those lanes undefined on a GPU (NaN here); give "
                           "other= a value that changes nothing, such as 0.0 for a sum.")
        if INPUT_MARGIN_BITS in sources:
            details.append("The NaN around an input (in its margins, and in the gaps of a "
                           "strided view): an unmasked load past the end of an input, or an "
                           "offset computed with a wrong stride?")
        if not sources & {UNDEFINED_BITS, INPUT_MARGIN_BITS} and undefined_read:
            details.append("A NaN where a number is expected, and a load without other= "
                           "had masked-off lanes, which read NaN here: through a maximum, a "
                           "sum or an exp their NaN spreads to a whole row. Give other= a "
                           "value that changes nothing: -inf for a maximum, 0.0 for a sum.")
        elif not sources & {UNDEFINED_BITS, INPUT_MARGIN_BITS}:
            details.append("A NaN where a number is expected: computed from an input's "
                           "margin or gaps (NaN: an unmasked load past the end, or a wrong "
                           "stride?), from masked-off lanes loaded without other=, or by "
                           "the arithmetic itself (inf - inf, 0 / 0)?")
    close = _largest_relative_error(actual, expected, bad)
    on_scale = _largest_error_on_scale(actual, expected, bad)
    if tf32_dots and on_scale is not None and on_scale <= ROUNDING_16_BIT[1]:
        details.append("tl.dot with float32 operands: on a GPU the tensor cores read them as "
                       "tf32, keeping 10 of float32's 23 fraction bits (a relative error of "
                       "up to 9.8e-4 per operand), and the checker cuts them so here "
                       "too. This exercise asks for float32 accuracy: multiply and add "
                       "with * and tl.sum, or pass input_precision=\"ieee\" to tl.dot "
                       "(slower on a GPU).")
    elif close is not None and ROUNDING_16_BIT[0] <= close <= ROUNDING_16_BIT[1]:
        details.append(f"Every wrong element is a number within {close:.1e} of the expected "
                       "one (relatively): about the rounding of a 16-bit float (float16 keeps "
                       "11 significant bits and rounds to within 4.9e-4, bfloat16 keeps 8 and "
                       "rounds to within 3.9e-3, float32 to within 6e-8). Does the kernel "
                       "compute in a 16-bit type: a .to(tl.float16) on a loaded value, a "
                       "tl.zeros(..., dtype=tl.float16) accumulator, a cast before the "
                       "store, a tl.dot on float32 operands (a GPU rounds them to tf32, 11 "
                       "significant bits like float16)? Keep every value float32 up to the "
                       "store (tl.store converts to the output's type by itself).")
    zeros = bad & (actual == 0) & ~unwritten
    if bool(zeros.any()) and bool((zeros == bad).all()):
        details.append("Every wrong element is exactly 0, a value a program or solve wrote, "
                       "not the checker's NaN: was the output zeroed and then never added "
                       "into (no program launched: a grid of n // BLOCK_SIZE is empty when n "
                       "< BLOCK_SIZE), or zeroed after the kernels ran?")
        if int(bad.sum()) >= ALL_NEGATIVE_AT_LEAST and bool((expected[bad] < 0).all()):
            details.append("Or, if the kernel takes a maximum: every expected value here is "
                           "negative, and a 0 that won a maximum reads so. Are masked-off "
                           "lanes loaded with other=0 (a maximum needs -inf there), or a "
                           "running maximum started at 0 rather than -inf?")
    return CaseResult(case, False, summary, details)


# How many wrong zeros, all where a negative value was expected, make a maximum that a 0
# won the likely story (a few could be chance: a sum of one negative element, say).
ALL_NEGATIVE_AT_LEAST = 8

# Relative errors, for every wrong element, that point at 16-bit arithmetic: above what
# float32 rounding and summation order give (a few 1e-7 to 1e-6), up to a few steps of
# bfloat16's 2**-8.
ROUNDING_16_BIT = (1e-4, 2e-2)


def _largest_relative_error(actual: torch.Tensor, expected: torch.Tensor,
                            bad: torch.Tensor) -> float | None:
    """The largest relative error over the ``bad`` elements, or None unless every one of
    them is a finite number next to a finite, nonzero expected value."""
    got, want = actual[bad], expected[bad]
    if not (bool(got.isfinite().all()) and bool(want.isfinite().all()) and bool(want.all())):
        return None
    return float(((got - want).abs() / want.abs()).max())


def _largest_error_on_scale(actual: torch.Tensor, expected: torch.Tensor,
                            bad: torch.Tensor) -> float | None:
    """The largest error over the ``bad`` elements, relative to the largest finite expected
    magnitude, or None unless every one of them is a finite number. A dot product's
    rounding shows this way: an output near zero, whose terms cancel, keeps the error of
    its terms, so its own relative error can be any size."""
    got, want = actual[bad], expected[bad]
    finite = expected[expected.isfinite()]
    if not (bool(got.isfinite().all()) and bool(want.isfinite().all())) or not finite.numel():
        return None
    scale = float(finite.abs().max())
    return float((got - want).abs().max()) / scale if scale else None


