"""What the built pages print: no machine paths and no Python warnings in any output block.

Reads the HTML of the last build (``make html``; see conftest.py for where it is looked
for); needs no browser. A path of the build machine or a warning in a page's output is
build noise to a reader: fix its cause, or filter it where the page prints it.
"""

from __future__ import annotations

import html
import re

import pytest
from conftest import SITE, _cannot_run, site_pages

LESSONS = [page for page in site_pages()
           if page.startswith("auto_examples/") and "/index" not in page]
# What a build machine leaks into an output: its home and temporary folders, this
# project's checkout and the installed packages; and the label Python's warnings carry.
MACHINE_PATHS = re.compile(r"/root/|/home/|site-packages|/tmp/|/work/")
WARNING = re.compile(r"\w*Warning:")
# sphinx-gallery puts what a cell printed (stdout and stderr) in these blocks.
OUTPUT_BLOCK = re.compile(r'<div class="sphx-glr-script-out[^"]*">(.*?)</pre>', re.DOTALL)


def output_blocks(page_html: str) -> list[str]:
    """The text of every output block of a built gallery page."""
    return [html.unescape(re.sub(r"<[^>]+>", "", block))
            for block in OUTPUT_BLOCK.findall(page_html)]


def noise(text: str) -> list[str]:
    """The lines of ``text`` that show a machine path or a warning."""
    return [line.strip() for line in text.splitlines()
            if MACHINE_PATHS.search(line) or WARNING.search(line)]


@pytest.mark.parametrize("docname", LESSONS or ["(no built site)"])
def test_outputs_show_no_machine_paths_or_warnings(docname):
    if not LESSONS:
        _cannot_run(f"no built site in {SITE} (run `make html` first)")
    found = [line for block in output_blocks((SITE / f"{docname}.html").read_text())
             for line in noise(block)]
    assert found == [], "\n".join(found)


def test_the_check_reads_output_blocks_and_finds_noise():
    page = ('<p>/home/in prose is fine</p><div class="sphx-glr-script-out highlight-none '
            'notranslate"><div class="highlight"><pre><span></span>ok\n'
            '/root/.venv/lib/python3.11/site-packages/torch/x.py:12: UserWarning: TF32 '
            '&amp; more\n</pre></div></div>')
    blocks = output_blocks(page)
    assert len(blocks) == 1 and "TF32 & more" in blocks[0]
    assert noise(blocks[0]) == [
        "/root/.venv/lib/python3.11/site-packages/torch/x.py:12: UserWarning: TF32 & more"]
    assert noise("a note, not a warning: fine\nresults/h100/softmax.json") == []
