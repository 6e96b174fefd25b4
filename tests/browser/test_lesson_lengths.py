"""Every lesson page fits in SCREEN_LIMIT screens of SCREEN px at the browser's 1280 px width.

Pages that are longer today are listed in LONG_PAGES with the screens they measured
(on a build without a GPU, which draws the recorded GPU results): the test fails when one
grows by more than SLACK past that, and when one comes within the limit (take it off the
list), so the list can only shrink.
"""

from __future__ import annotations

import pytest
from conftest import WIDTH, site_pages

SCREEN, SCREEN_LIMIT = 2400, 6.0
# A GPU build prints a few more lines than a CPU one (live timings beside the recorded).
SLACK = 0.3
LESSONS = [page for page in site_pages()
           if page.startswith("auto_examples/") and "/index" not in page
]
# docname -> screens measured when it was listed (a CPU build drawing the recordings of
# an H100 and an H200). Each needs a split or its measurement moved into helpers.
LONG_PAGES: dict[str, float] = {}  # empty: every lesson page fits


def screens(visit, docname: str) -> float:
    page = visit(docname).page
    assert page.viewport_size["width"] == WIDTH == 1280
    return page.evaluate("document.documentElement.scrollHeight") / SCREEN


@pytest.mark.parametrize("docname", LESSONS or ["index"])
def test_lesson_fits_in_six_screens(visit, docname):
    measured = screens(visit, docname)
    listed = LONG_PAGES.get(docname)
    if listed is None:
        assert measured <= SCREEN_LIMIT, (
            f"{measured:.1f} screens of {SCREEN} px at {WIDTH} px, over the limit of "
            f"{SCREEN_LIMIT}: move measurement into helpers or split the page")
    else:
        assert measured > SCREEN_LIMIT, (
            f"{measured:.1f} screens, within the limit now: take it off LONG_PAGES")
        assert measured <= listed + SLACK, (
            f"{measured:.1f} screens, longer than the {listed} it was listed with")


def test_long_pages_are_lessons_of_this_build():
    if not LESSONS:
        pytest.skip("no built site")
    assert set(LONG_PAGES) <= set(LESSONS), set(LONG_PAGES) - set(LESSONS)
