"""Serve the built site on localhost and open it in a headless Chromium (Playwright).

The site must be built first (``make html``); ``make test`` does that before it runs these
tests. They need Playwright for Python (``pip install playwright``, in the ``test`` extra)
and a Chromium on the machine: Debian/Ubuntu ``apt-get install chromium``, or any Chromium
or Chrome named by the ``CHROMIUM`` environment variable. Playwright's own browser download
is not used. Without either, the tests are skipped with a message that says this.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("TRITON_GUIDE_SITE", ROOT / "_build" / "html"))
WIDTH, HEIGHT = 1280, 900
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOW_TO_ENABLE = (
    "install Playwright for Python (pip install playwright; it is in the project's "
    "'test' extra) and Chromium (Debian/Ubuntu: apt-get install chromium, or set CHROMIUM "
    "to a Chromium/Chrome executable), then run `make test` or `pytest tests/browser`"
)


def site_pages() -> list[str]:
    """The documents of the last build (their names, as in Sphinx's search index)."""
    index = SITE / "searchindex.js"
    if not index.is_file():
        return []
    text = index.read_text(encoding="utf-8")
    payload = text[text.index("(") + 1 : text.rindex(")")]
    return sorted(json.loads(payload)["docnames"])


def chromium_executable() -> str | None:
    candidates = [os.environ.get("CHROMIUM")] + [
        shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
    ]
    return next((path for path in candidates if path and Path(path).exists()), None)


def _cannot_run(reason: str):
    """Skip, or fail where the browser tests are required (REQUIRE_BROWSER_TESTS=1, CI)."""
    message = f"browser tests cannot run, {reason}: {HOW_TO_ENABLE}"
    if os.environ.get("REQUIRE_BROWSER_TESTS") == "1":
        pytest.fail(message)
    pytest.skip(message)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002  (the base class's name)
        pass


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "index.html").is_file():
        _cannot_run(f"no built site in {SITE} (run `make html` first)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _cannot_run("Playwright is missing")
    executable = chromium_executable()
    if executable is None:
        _cannot_run("no Chromium found")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def context(browser, site_url):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site_url)
    yield context
    context.close()


class PageVisit:
    """One visit of a page, with everything the checks need, recorded once."""

    def __init__(self, context, url: str):
        self.console_errors: list[str] = []
        self.failed_requests: list[str] = []
        page = context.new_page()
        page.on(
            "console",
            lambda message: message.type == "error"
            and self.console_errors.append(message.text),
        )
        page.on("pageerror", lambda error: self.console_errors.append(str(error)))
        page.on(
            "requestfailed",
            lambda request: self.failed_requests.append(
                f"{request.url} ({request.failure})"
            ),
        )
        page.on(
            "response",
            lambda response: response.status >= 400
            and self.failed_requests.append(f"{response.url} (HTTP {response.status})"),
        )
        page.goto(url, wait_until="load")
        self.page = page
        self.has_math = page.locator(".math").count() > 0
        if self.has_math:
            page.wait_for_selector("mjx-container", state="attached", timeout=15_000)
        page.wait_for_load_state("networkidle")
        self.images = page.eval_on_selector_all(
            "img",
            "imgs => imgs.map(i => ({src: i.currentSrc || i.src,"
            " loaded: i.complete && i.naturalWidth > 0}))",
        )
        # Every code block's box against what its text needs, measured once: a block
        # wider than its box needs a horizontal scroll bar, one taller a vertical one
        # (its last lines hidden from a reader who does not scroll inside it).
        blocks = page.eval_on_selector_all(
            "div.highlight pre",
            """blocks => blocks.map(b => ({
                width: b.clientWidth, needed_width: b.scrollWidth,
                height: b.clientHeight, needed_height: b.scrollHeight,
                lines: b.innerText.trimEnd().split('\\n'),
            }))""",
        )
        self.overflowing = [
            {"width": b["width"], "needed": b["needed_width"], "line": max(b["lines"], key=len)}
            for b in blocks if b["needed_width"] > b["width"] + 1]
        self.clipped = [
            {"height": b["height"], "needed": b["needed_height"], "last": b["lines"][-1]}
            for b in blocks if b["needed_height"] > b["height"] + 1]

_visits: dict[str, PageVisit] = {}


@pytest.fixture
def visit(context, site_url):
    """``visit(docname)``: the page's recorded visit (loaded once per test session)."""

    def load(docname: str) -> PageVisit:
        if docname not in _visits:
            _visits[docname] = PageVisit(context, f"{site_url}/{docname}.html")
        return _visits[docname]

    return load


def lesson_topic(title: str) -> str:
    """What a reader would search for to find a lesson: its title before the colon, or
    after it when the part before is only a number ("Exercise 1: Scaled add")."""
    title = re.sub(r"^Exercise \d+:\s*", "", title)
    return re.split(r"[:,]", title)[0].strip()
