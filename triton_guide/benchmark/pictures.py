"""Teaching pictures: which program of a launch owns which elements or tiles.

Each ``draw_*`` function draws one picture a lesson page shows, on a new pyplot figure (so
that the gallery picks it up), and returns the figure. They share one way of drawing a
grid of cells, each filled with a colour and labelled, its label white on dark fills
(:func:`draw_cells`). :func:`element_owners` and :func:`tile_owners` compute who owns
what; the pictures are drawn from them, and the tests check them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

# Mixed with this much white, the last tile column of draw_tile_owners: each program keeps
# its row's hue, and the columns stay apart.
PALEST = 0.7
# Below this luminance (0 black, 1 white) a cell's label is white.
DARK = 0.5
# draw_tile_mask's fills: loaded lanes green, masked-off lanes grey (their labels too).
LOADED, MASKED, MASKED_TEXT = "#74c476", "#e8e8e8", "grey"
# draw_program_order: Blues at these points for the first programs and for the others.
FIRST_SHADE, OTHER_SHADE = 0.8125, 0.1875


def element_owners(n: int, block: int) -> np.ndarray:
    """The program that owns each index of a 1D launch of ``cdiv(n, block)`` programs of
    ``block`` lanes: ``owners[i] = i // block``, for every lane, the masked ones past ``n``
    included (``len(owners)`` is the grid times ``block``)."""
    if n < 1 or block < 1:
        raise ValueError(f"n and block must be at least 1, got n={n}, block={block}")
    num_programs = -(-n // block)
    return np.arange(num_programs * block) // block


def tile_owners(tiles: Sequence[Sequence[int]] | np.ndarray, grid: tuple[int, int]
                ) -> np.ndarray:
    """The program that computes each tile of a ``grid = (tile rows, tile columns)``
    output, from ``tiles[pid] = (pid_m, pid_n)``, the tile each program computes (e.g.
    :func:`triton_guide.matmul_steps.program_tiles`); -1 where no program does. Raises if
    two programs compute the same tile."""
    owners = np.full(grid, -1, dtype=int)
    for pid, (pid_m, pid_n) in enumerate(np.asarray(tiles).tolist()):
        if owners[pid_m, pid_n] != -1:
            raise ValueError(f"tiles: programs {owners[pid_m, pid_n]} and {pid} both compute "
                             f"tile ({pid_m}, {pid_n}); each tile needs one program")
        owners[pid_m, pid_n] = pid
    return owners


def _is_dark(rgb) -> bool:
    return float(np.asarray(rgb)[:3] @ np.array([0.299, 0.587, 0.114])) < DARK


def draw_cells(ax, colours: np.ndarray, labels, *, extent=None, fontsize: int = 8,
               text_colours=None) -> None:
    """Fill cell (i, j) of ``ax`` with ``colours[i, j]`` (RGB or RGBA) and write
    ``labels[i][j]`` on it, white on a dark fill and black on a light one unless
    ``text_colours[i][j]`` says otherwise. ``extent`` (left, right, bottom, top), as for
    ``imshow``, puts the cells in data units (elements, say); else each cell is one unit."""
    colours = np.asarray(colours, dtype=float)
    rows, cols = colours.shape[:2]
    left, right, bottom, top = extent or (-0.5, cols - 0.5, rows - 0.5, -0.5)
    ax.imshow(colours, interpolation="nearest", extent=extent)
    width, height = (right - left) / cols, (bottom - top) / rows
    for i in range(rows):
        for j in range(cols):
            colour = (text_colours[i][j] if text_colours is not None
                      else "white" if _is_dark(colours[i, j]) else "black")
            ax.text(left + (j + 0.5) * width, top + (i + 0.5) * height, str(labels[i][j]),
                    ha="center", va="center", fontsize=fontsize, color=colour)


def draw_element_owners(n: int, block: int):
    """A 1D launch as a strip of elements ``0..n-1``, each program's block in its own
    colour and labelled with its id; the lanes of the last block past ``n`` are hatched
    (the mask switches them off)."""
    import matplotlib.pyplot as plt

    owners = element_owners(n, block)
    num_programs = owners[-1] + 1
    widths = np.bincount(owners[:n], minlength=num_programs)  # elements each one writes
    colours = plt.cm.tab20(np.arange(num_programs) % 20)
    fig, ax = plt.subplots(figsize=(8, 1.8))
    for pid, start in enumerate(range(0, n, block)):
        ax.barh(0, widths[pid], left=start, color=colours[pid], edgecolor="white")
        ax.text(start + widths[pid] / 2, 0, str(pid), ha="center", va="center", fontsize=8)
    ax.barh(0, len(owners) - n, left=n, color="none", edgecolor="grey", hatch="//")
    ax.axvline(n, color="black", linewidth=1)
    ax.set_yticks([])
    ax.set_xlabel("element index")
    ax.set_title(f"N = {n}, BLOCK_SIZE = {block}: {num_programs} programs; "
                 f"the last one is masked past {n}")
    fig.tight_layout()
    return fig


def draw_tile_owners(shape: tuple[int, int], block: tuple[int, int]):
    """A 2D launch over a ``shape = (rows, columns)`` matrix in ``block`` tiles: each tile
    in the colour of the program ``(program_id(0), program_id(1))`` that owns it, a hue
    per ``program_id(0)``, paler as ``program_id(1)`` grows; axes in elements (tiles on a
    ragged edge are drawn whole)."""
    import matplotlib.pyplot as plt

    grid = tuple(-(-size // tile) for size, tile in zip(shape, block))
    hues = plt.cm.tab10(np.arange(grid[0]) % 10)[:, :3]
    paler = PALEST * np.arange(grid[1]) / max(grid[1] - 1, 1)  # share of white per column
    colours = (1 - paler[None, :, None]) * hues[:, None, :] + paler[None, :, None]
    labels = [[f"({pid_m},{pid_n})" for pid_n in range(grid[1])] for pid_m in range(grid[0])]
    fig, ax = plt.subplots(figsize=(4.5, 6))
    draw_cells(ax, colours, labels, fontsize=9,
               extent=(0, grid[1] * block[1], grid[0] * block[0], 0))
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    ax.set_title("tile owned by program (program_id(0), program_id(1))", fontsize=9)
    fig.tight_layout()
    return fig


def draw_program_order(orders: Mapping[str, np.ndarray], first: int):
    """One panel per launch order of a matmul's programs over the tiles of C (``orders``:
    name -> ``tiles[pid] = (pid_m, pid_n)``), each tile labelled with the program that
    computes it and the ``first`` programs shaded; each title says how many tile rows of
    A and tile columns of B those first programs read."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(orders), figsize=(9, 4.4), layout="constrained",
                             squeeze=False)
    for ax, (name, tiles) in zip(axes[0], orders.items()):
        tiles = np.asarray(tiles)
        grid = (int(tiles[:, 0].max()) + 1, int(tiles[:, 1].max()) + 1)
        owners = tile_owners(tiles, grid)
        colours = plt.cm.Blues(np.where(owners < first, FIRST_SHADE, OTHER_SHADE))
        draw_cells(ax, colours, owners, fontsize=7)
        a_rows, b_cols = (len(set(tiles[:first, axis].tolist())) for axis in (0, 1))
        ax.set_title(f"{name}\nthe first {first} programs read tile rows of A: {a_rows}, "
                     f"tile columns of B: {b_cols}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("tile column of C (pid_n): a column of B tiles", fontsize=9)
        ax.set_ylabel("tile row of C (pid_m): a row of A tiles", fontsize=9)
    return fig


def draw_tile_mask(rows: np.ndarray, cols: np.ndarray, mask: np.ndarray,
                   offsets: np.ndarray, shape: tuple[int, int]):
    """One tile of a ``shape = (M, N)`` matrix stored row by row: each lane labelled with
    its offset ``row * N + col``, green where ``mask`` loads it and grey where it is
    masked off; ticks are the tile's row indices ``rows`` and column indices ``cols``."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgb

    mask = np.asarray(mask, dtype=bool)
    colours = np.where(mask[..., None], to_rgb(LOADED), to_rgb(MASKED))
    text = np.where(mask, "black", MASKED_TEXT)
    tile = (int(rows[0]) // len(rows), int(cols[0]) // len(cols))
    fig, ax = plt.subplots(figsize=(5, 5))
    draw_cells(ax, colours, offsets, text_colours=text)
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("column index (cols[None, :])")
    ax.set_ylabel("row index (rows[:, None])")
    ax.set_title(f"offsets row * {shape[1]} + col of tile {tile} in an {shape[0]} x "
                 f"{shape[1]} matrix;\ngreen: mask true (loaded); grey: mask false "
                 "(not loaded)", fontsize=9)
    fig.tight_layout()
    return fig


def draw_key_masks(masks: Mapping[str, np.ndarray]):
    """One panel per attention mask of ``masks`` (title -> boolean array or tensor of
    shape ``(queries, keys)``, true where query ``i`` sees key ``j``), filled where it is
    true, with the line ``j = i + Nk - Nq``: the diagonal of a causal mask aligned
    bottom-right, on which the last query sees every key. The last panel has the legend."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(masks), figsize=(8, 2.6), squeeze=False)
    for ax, (title, mask) in zip(axes[0], masks.items()):
        mask = np.asarray(mask, dtype=bool)
        num_queries, num_keys = mask.shape
        ax.imshow(mask, cmap="Blues", vmin=0, vmax=1.4, aspect="auto")
        ax.plot([-0.5, num_keys - 0.5], [num_queries - num_keys - 0.5, num_queries - 0.5],
                color="black", linewidth=1, label="j = i + Nk - Nq")
        ax.set(xlim=(-0.5, num_keys - 0.5), ylim=(num_queries - 0.5, -0.5), xlabel="key j",
               ylabel="query i", title=title)
    axes[0, -1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    return fig
