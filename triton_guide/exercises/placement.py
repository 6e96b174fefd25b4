"""Where the checker puts the tensors it hands ``solve``: each inside a larger buffer with
margins before and after it (and gaps, for a strided view), filled with values of the
checker's own, so that an element a kernel never wrote, or a write or a read off the
tensor's elements, shows up."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Elements kept before and after every tensor handed to ``solve`` (at least the span of the
# tensor itself): wide enough for a whole block of 4096 lanes to run past the end.
MARGIN = 4096
# The NaN an output is filled with: a quiet NaN with a payload of its own. An element still
# holding these bits was never written, or was computed from the poison (on a CPU, NaN + 1
# keeps the payload); a NaN the kernel computes from its inputs has other bits.
POISON_BITS = 0x7FC0DEAD
# The NaN in the margins and gaps around an input, with a payload of its own too.
INPUT_MARGIN_BITS = 0x7FC0FEED
# What the margins around an input hold in the second run of a case, where the checker
# cannot watch the addresses (on a GPU): finite and larger than any input, so that an
# unmasked load past the end wins a maximum, which ignores NaN.
LARGE_MARGIN_FILL = 3.0e38
# What the margins around an output hold. Not NaN: an unmasked store past the end often
# stores NaN (read from an input's margin), which must show up as a change.
OUTPUT_MARGIN_FILL = -12345.0


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


@dataclass
class Placed:
    buffer: torch.Tensor  # the whole allocation, margins included
    view: torch.Tensor  # what solve receives
    margin: int
    span: int  # elements from the view's first to its last element


def fill(tensor: torch.Tensor, value: float | int) -> None:
    """Fill a float32 ``tensor`` with ``value``: a float, or an int taken as the bits of one."""
    if isinstance(value, int):
        tensor.view(torch.int32).fill_(value)
    else:
        tensor.fill_(value)


def place(shape, strides, device, values: torch.Tensor | None,
           margin_fill: float | int) -> Placed:
    """A tensor of ``shape`` and ``strides`` inside a buffer with margins on both sides.

    An input (``values`` given) gets ``margin_fill`` in its margins and gaps; an output
    (``values=None``) is the poison NaN inside and ``OUTPUT_MARGIN_FILL`` in its margins.
    """
    span = 1 + sum((size - 1) * stride for size, stride in zip(shape, strides))
    margin = max(MARGIN, span)
    buffer = torch.empty((margin + span + margin,), device=device)
    view = buffer.as_strided(shape, strides, margin)
    if values is None:
        fill(buffer, OUTPUT_MARGIN_FILL)
        fill(buffer[margin: margin + span], POISON_BITS)
    else:
        fill(buffer, margin_fill)
        view.copy_(values)
    return Placed(buffer, view, margin, span)


def margin_writes(placed: Placed) -> tuple[int, int]:
    """How many margin elements, before and after an output, a kernel has changed."""
    before = placed.buffer[: placed.margin]
    after = placed.buffer[placed.margin + placed.span:]
    return int((before != OUTPUT_MARGIN_FILL).sum()), int((after != OUTPUT_MARGIN_FILL).sum())


def nan_bits(values: torch.Tensor) -> torch.Tensor:
    """The float32 bits of ``values``, for telling the checker's NaNs apart."""
    return values.float().contiguous().view(torch.int32)


