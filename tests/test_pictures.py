"""The teaching pictures of ``triton_guide.benchmark.pictures``: who owns what, and the
figures drawn from it (titles, panels, cell labels and fills)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from triton_guide.benchmark import (draw_cells, draw_element_owners,  # noqa: E402
                                    draw_program_order, draw_tile_mask, draw_tile_owners,
                                    element_owners, tile_owners)
from triton_guide.benchmark import pictures  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def grouped_tiles(tile_rows, tile_cols, group):
    """tiles[pid] = (pid_m, pid_n) of a grouped launch order, written out from its
    definition: groups of ``group`` tile rows, each walked column by column."""
    tiles = []
    for first_row in range(0, tile_rows, group):
        rows = min(group, tile_rows - first_row)
        for pid_n in range(tile_cols):
            tiles += [(first_row + i, pid_n) for i in range(rows)]
    return np.array(tiles)


def texts(ax):
    return [text.get_text() for text in ax.texts]


@pytest.mark.parametrize("n, block", [(1000, 64), (1024, 64), (1, 64), (65, 64), (7, 1)],
                         ids=["ragged_tail", "exact_multiple", "n=1", "tail_of_1", "block=1"])
def test_element_owners_give_each_block_to_one_program(n, block):
    owners = element_owners(n, block)
    num_programs = -(-n // block)
    assert len(owners) == num_programs * block
    assert np.array_equal(np.bincount(owners), np.full(num_programs, block))
    assert np.all(np.diff(owners) >= 0)  # blocks are contiguous, in program order
    assert owners[n - 1] == num_programs - 1  # the last element is the last program's


def test_element_owners_refuse_an_empty_launch():
    with pytest.raises(ValueError, match="n and block"):
        element_owners(0, 64)


def test_tile_owners_invert_the_tiles_of_each_program():
    tiles = grouped_tiles(5, 4, 2)
    owners = tile_owners(tiles, (5, 4))
    assert sorted(owners.ravel().tolist()) == list(range(20))
    for pid, (pid_m, pid_n) in enumerate(tiles.tolist()):
        assert owners[pid_m, pid_n] == pid
    # grouped by 2: down the first two tile rows, then one column right
    assert owners[:2, :2].tolist() == [[0, 2], [1, 3]]
    assert owners[4].tolist() == [16, 17, 18, 19]  # the last, short group: one row


def test_tile_owners_mark_tiles_no_program_computes_and_refuse_a_tile_twice():
    assert tile_owners([(0, 0), (1, 1)], (2, 2)).tolist() == [[0, -1], [-1, 1]]
    with pytest.raises(ValueError, match="programs 0 and 1 both compute tile"):
        tile_owners([(0, 1), (0, 1)], (1, 2))


def test_draw_cells_writes_each_label_on_its_cell_white_on_dark():
    fig, ax = plt.subplots()
    colours = np.array([[[0, 0, 0], [1, 1, 1]]], dtype=float)
    draw_cells(ax, colours, [["dark", "light"]], extent=(0, 20, 10, 0))
    (dark, light) = ax.texts
    assert dark.get_position() == (5, 5) and light.get_position() == (15, 5)
    assert to_rgb(dark.get_color()) == (1, 1, 1) and to_rgb(light.get_color()) == (0, 0, 0)


def test_element_owners_strip():
    fig = draw_element_owners(1000, 64)
    (ax,) = fig.axes
    assert ax.get_title() == ("N = 1000, BLOCK_SIZE = 64: 16 programs; "
                              "the last one is masked past 1000")
    assert texts(ax) == [str(pid) for pid in range(16)]
    bars = ax.patches
    widths = [bar.get_width() for bar in bars]
    assert widths == [64] * 15 + [40, 24]  # the last block's 40 elements, 24 masked lanes
    assert bars[-1].get_hatch() == "//" and bars[-1].get_x() == 1000


def test_tile_owners_grid():
    fig = draw_tile_owners((512, 256), (64, 64))
    (ax,) = fig.axes
    assert ax.get_title() == "tile owned by program (program_id(0), program_id(1))"
    assert texts(ax) == [f"({m},{n})" for m in range(8) for n in range(4)]
    image = ax.get_images()[0]
    assert image.get_extent() == [0, 256, 512, 0]
    colours = image.get_array()
    hues = plt.cm.tab10(np.arange(8))[:, :3]
    assert np.allclose(colours[:, 0], hues)  # program_id(1) = 0: the row's own hue
    last = (1 - pictures.PALEST) * hues + pictures.PALEST
    assert np.allclose(colours[:, -1], last)  # the last column: the palest


def test_program_order_shades_the_first_programs_in_each_panel():
    orders = {"row-major": grouped_tiles(9, 9, 1), "grouped": grouped_tiles(9, 9, 3)}
    fig = draw_program_order(orders, first=9)
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == [
        "row-major\nthe first 9 programs read tile rows of A: 1, tile columns of B: 9",
        "grouped\nthe first 9 programs read tile rows of A: 3, tile columns of B: 3"]
    for ax, tiles in zip(fig.axes, orders.values()):
        owners = tile_owners(tiles, (9, 9))
        assert texts(ax) == [str(pid) for pid in owners.ravel()]
        shaded = ax.get_images()[0].get_array()[..., 2] < 0.8  # the darker blue
        assert np.array_equal(shaded, owners < 9)


def test_tile_mask_greens_the_loaded_lanes():
    M, N, block = 11, 13, 8
    rows, cols = block + np.arange(block), block + np.arange(block)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offsets = rows[:, None] * N + cols[None, :]
    fig = draw_tile_mask(rows, cols, mask, offsets, shape=(M, N))
    (ax,) = fig.axes
    assert ax.get_title() == ("offsets row * 13 + col of tile (1, 1) in an 11 x 13 matrix;\n"
                              "green: mask true (loaded); grey: mask false (not loaded)")
    assert texts(ax) == [str(offset) for offset in offsets.ravel()]
    fills = ax.get_images()[0].get_array()
    green = np.all(np.isclose(fills, to_rgb(pictures.LOADED)), axis=-1)
    assert np.array_equal(green, mask) and green.sum() == 3 * 5
    assert [label.get_text() for label in ax.get_xticklabels()] == [str(c) for c in cols]


def test_key_masks_fill_what_each_query_sees_and_draw_the_bottom_right_diagonal():
    seen = np.tril(np.ones((6, 4), dtype=bool), k=4 - 6)  # query i sees keys j <= i - 2
    fig = pictures.draw_key_masks({"6 queries, 4 keys": seen, "all": np.ones((2, 3), bool)})
    first, second = fig.axes
    assert [first.get_title(), second.get_title()] == ["6 queries, 4 keys", "all"]
    assert np.array_equal(first.get_images()[0].get_array(), seen)
    (diagonal,) = first.get_lines()  # j = i + Nk - Nq: from (-0.5, 1.5) to (3.5, 5.5)
    assert list(diagonal.get_xdata()) == [-0.5, 3.5]
    assert list(diagonal.get_ydata()) == [1.5, 5.5]
    assert first.get_ylim() == (5.5, -0.5)  # query 0 at the top
    assert first.get_legend() is None and second.get_legend() is not None
