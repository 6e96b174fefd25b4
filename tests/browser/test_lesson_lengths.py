"""Every lesson page fits in SCREEN_LIMIT screens of SCREEN px at the browser's 1280 px width.

A page over the limit needs its measurement moved into ``triton_guide.benchmark`` helpers
or a split into two lessons.
"""

from __future__ import annotations

import pytest
from conftest import WIDTH, site_pages

SCREEN, SCREEN_LIMIT = 2400, 6.0
LESSONS = [page for page in site_pages()
           if page.startswith("auto_examples/") and "/index" not in page
]


def screens(visit, docname: str) -> float:
    page = visit(docname).page
    assert page.viewport_size["width"] == WIDTH == 1280
    return page.evaluate("document.documentElement.scrollHeight") / SCREEN


@pytest.mark.parametrize("docname", LESSONS or ["index"])
def test_lesson_fits_in_six_screens(visit, docname):
    measured = screens(visit, docname)
    assert measured <= SCREEN_LIMIT, (
        f"{measured:.1f} screens of {SCREEN} px at {WIDTH} px, over the limit of "
        f"{SCREEN_LIMIT}: move measurement into helpers or split the page")
