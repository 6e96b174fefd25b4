"""The built site, as a reader's browser shows it (see conftest.py for what this needs)."""

from __future__ import annotations

import pytest
from conftest import lesson_topic, site_pages

PAGES = site_pages() or ["index"]
LESSONS = [page for page in PAGES if page.startswith("auto_examples/") and "/index" not in page]


@pytest.mark.parametrize("docname", PAGES)
def test_page_loads_without_console_errors(visit, docname):
    errors = visit(docname).console_errors
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("docname", PAGES)
def test_page_requests_nothing_that_fails(visit, docname):
    failed = visit(docname).failed_requests
    assert failed == [], "\n".join(failed)


@pytest.mark.parametrize("docname", PAGES)
def test_every_image_loads(visit, docname):
    broken = [image["src"] for image in visit(docname).images if not image["loaded"]]
    assert broken == []


@pytest.mark.parametrize("docname", PAGES)
def test_no_code_block_overflows_at_1280px(visit, docname):
    overflowing = visit(docname).overflowing
    assert overflowing == [], "\n".join(
        f"{block['needed']} px in a {block['width']} px box: {block['line']!r}"
        for block in overflowing
    )


@pytest.mark.parametrize("docname", PAGES)
def test_no_code_block_hides_its_end_behind_a_scroll_bar(visit, docname):
    clipped = visit(docname).clipped
    assert clipped == [], "\n".join(
        f"{block['needed']} px in a {block['height']} px box, last line {block['last']!r}"
        for block in clipped
    )


@pytest.mark.parametrize("docname", PAGES)
def test_math_renders(visit, docname):
    page_visit = visit(docname)
    if not page_visit.has_math:
        pytest.skip("no math on this page")
    rendered = page_visit.page.locator("mjx-container").count()
    assert rendered == page_visit.page.locator(".math").count()


@pytest.mark.parametrize("docname", PAGES)
def test_copy_button_copies_the_code(visit, docname):
    page = visit(docname).page
    blocks = page.locator("div.highlight:has(button.copybtn)")
    if blocks.count() == 0:
        pytest.skip("no code block on this page")
    block = blocks.first
    block.scroll_into_view_if_needed()
    block.hover()
    block.locator("button.copybtn").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    shown = block.locator("pre").inner_text()
    assert copied.strip() == shown.strip()


@pytest.mark.parametrize("docname", PAGES)
def test_dark_mode_switches(visit, docname):
    page = visit(docname).page

    def choose(mode: str) -> str:
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("button.theme-switch-button:visible").first.click()  # opens the menu
        item = page.locator(f"button.theme-change-button[data-mode={mode}]:visible").first
        item.dispatch_event("click")  # no waiting for the menu's fade-in animation
        return page.evaluate("document.documentElement.dataset.theme")

    themes = [choose("light"), choose("dark")]
    choose("auto")  # as it was, for the pages visited after this one
    assert themes == ["light", "dark"]


def search_results(context, site_url, query: str) -> list[str]:
    page = context.new_page()
    try:
        page.goto(f"{site_url}/search.html?q={query}", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=15_000)
        return page.eval_on_selector_all(
            "#search-results ul.search li a",
            "links => links.map(a => new URL(a.href).pathname.replace(/^\\//, ''))",
        )
    finally:
        page.close()


@pytest.mark.parametrize("docname", LESSONS)
def test_search_for_a_lessons_topic_lists_it_first(context, site_url, visit, docname):
    title = visit(docname).page.locator("article h1").first.inner_text()
    topic = lesson_topic(title.rstrip("#¶ "))
    results = search_results(context, site_url, topic)
    assert results[:1] == [f"{docname}.html"], f"search for {topic!r}: {results[:5]}"


@pytest.mark.parametrize("query", ["mask", "softmax", "matmul"])
def test_search_lists_a_lesson_first(context, site_url, query):
    if not LESSONS:
        pytest.skip("the site has no lessons")
    results = search_results(context, site_url, query)
    assert results and results[0].startswith("auto_examples/"), results[:5]
