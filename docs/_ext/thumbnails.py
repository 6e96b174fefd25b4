"""Thumbnails for gallery pages that draw no figure.

On a GPU most pages end with a benchmark plot, which sphinx-gallery uses as the page's
thumbnail. Under the interpreter there are no timings, so several pages draw nothing and
would get sphinx-gallery's generic placeholder. After the gallery is generated, this
extension gives each such page a small picture of its section's idea (a vector cut into
program blocks with a masked tail for the basics, a tiled matrix product for the core
kernels, a grid with one wrong element for debugging, a stub with its TODOs and the
checker's tick for the exercises) with the page's number on it.
Pages that drew a figure keep the thumbnail sphinx-gallery made from it.
"""

from __future__ import annotations

import io
from pathlib import Path

SIZE_INCHES, DPI = (4.0, 2.8), 100  # sphinx-gallery's thumbnail_size: 400 x 280 px
BLUE, ORANGE, GREY, RED = "#4c72b0", "#dd8452", "#d0d0d0", "#c44e52"


def _vector_blocks(ax):
    colors = [BLUE, ORANGE, "#55a868"]
    for lane in range(12):
        program = lane // 4
        masked = lane >= 10
        ax.add_patch(
            _rect(lane * 0.8 + 0.25, 3.4, 0.7, 0.7, GREY if masked else colors[program],
                  hatch="//" if masked else None)
        )
    for program in range(3):
        ax.text(program * 3.2 + 1.8, 3.0, f"pid {program}", ha="center", va="top",
                fontsize=11, color="#333333")


def _tiled_matmul(ax):
    for row in range(4):
        for col in range(4):
            highlighted = (row, col) == (1, 2)
            band = row == 1 or col == 2
            color = ORANGE if highlighted else ("#a6bddb" if band else "#e8e8e8")
            ax.add_patch(_rect(3.0 + col * 0.9, 1.7 + (3 - row) * 0.9, 0.8, 0.8, color))
    ax.text(1.6, 3.5, "C[m, n] =\nΣ A[m, k] B[k, n]", ha="center", va="center",
            fontsize=11, color="#333333")


def _debug_grid(ax):
    for row in range(4):
        for col in range(8):
            wrong = (row, col) == (2, 5)
            ax.add_patch(_rect(0.6 + col * 0.9, 1.6 + row * 0.9, 0.8, 0.8,
                               RED if wrong else "#b7d7a8"))
    ax.add_patch(_circle(0.6 + 5 * 0.9 + 0.4, 1.6 + 2 * 0.9 + 0.4, 0.75))


def _stub_checked(ax):
    # A file with lines of code, two of them still "TODO", beside the checker's verdict.
    ax.add_patch(_rect(0.8, 0.9, 5.2, 5.4, "#f3f3f3"))
    for line, (indent, width, todo) in enumerate([(0, 3.2, False), (0.5, 2.6, False),
                                                  (0.5, 3.6, True), (0.5, 2.2, False),
                                                  (0.5, 3.0, True), (0, 1.8, False)]):
        y = 5.5 - line * 0.8
        if todo:
            ax.text(1.3 + indent, y + 0.22, "TODO", fontsize=10, fontweight="bold",
                    color=ORANGE, va="center")
        else:
            ax.add_patch(_rect(1.3 + indent, y, width, 0.42, "#a6bddb"))
    ax.text(7.9, 3.6, "\u2713", fontsize=48, color="#55a868", ha="center", va="center")
    ax.text(7.9, 1.6, "check", fontsize=12, color="#333333", ha="center", va="center",
            family="monospace")


def _rect(x, y, w, h, color, hatch=None):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, facecolor=color, edgecolor="white", hatch=hatch)


def _circle(x, y, r):
    from matplotlib.patches import Circle

    return Circle((x, y), r, fill=False, edgecolor="#333333", linewidth=3)


MOTIFS = {"basics": _vector_blocks, "core_kernels": _tiled_matmul, "hopper": _tiled_matmul,
          "debugging": _debug_grid,
          "exercises": _stub_checked}


def draw_thumbnail(section: str, number: str) -> bytes:
    """PNG bytes of the thumbnail for page ``number`` of ``section``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    ax = figure.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10 * SIZE_INCHES[1] / SIZE_INCHES[0])  # equal aspect: 10 x 7
    ax.set_axis_off()
    MOTIFS.get(section, _debug_grid)(ax)
    ax.text(9.7, 6.7, number, ha="right", va="top", fontsize=22, fontweight="bold",
            color="#555555")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def update_thumbnails(gallery_dir: Path) -> list[Path]:
    """Write a section thumbnail for every page of ``gallery_dir`` that drew no figure."""
    written = []
    for rst in sorted(Path(gallery_dir).glob("*/*.rst")):
        stem, section_dir = rst.stem, rst.parent
        if not (section_dir / f"{stem}.py").is_file():
            continue  # a section index, not a page
        if (section_dir / "images" / f"sphx_glr_{stem}_001.png").is_file():
            continue  # the page drew a figure; sphinx-gallery's thumbnail shows it
        thumb = section_dir / "images" / "thumb" / f"sphx_glr_{stem}_thumb.png"
        picture = draw_thumbnail(section_dir.name, stem.split("_")[0])
        if thumb.is_file() and thumb.read_bytes() == picture:
            continue
        thumb.parent.mkdir(parents=True, exist_ok=True)
        thumb.write_bytes(picture)
        written.append(thumb)
    return written


def _on_builder_inited(app) -> None:
    galleries = app.config.sphinx_gallery_conf.get("gallery_dirs", [])
    galleries = [galleries] if isinstance(galleries, str) else list(galleries)
    for gallery in galleries:
        update_thumbnails(Path(app.srcdir) / gallery)


def setup(app):
    app.connect("builder-inited", _on_builder_inited, priority=600)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
