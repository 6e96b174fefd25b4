"""A ``lessons`` directive: every gallery page, section by section, in learning order.

The front page lists the lessons without anyone keeping a list by hand: sections come in
the order of ``lessons_sections`` (``GALLERY_SECTIONS`` in ``conf.py``), each titled from
its ``README.txt`` and linked to its gallery index; inside a section, pages come in file-name
order (``01_...``, ``02_...``), as in the gallery, each with the first sentence of its
docstring.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


def _first_sentence(text: str) -> str:
    """The first sentence of the first paragraph; a colon does not end it (what follows
    one says what the page is about), a paragraph that ends in one ends with a full stop."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.!?])(\s|$)", paragraph)
    sentence = match.group(1) if match else paragraph
    return sentence.rstrip(":") + ("." if sentence.endswith(":") else "")


def page_summary(page: Path) -> str:
    """The first sentence after the title of the page's docstring."""
    docstring = ast.get_docstring(ast.parse(page.read_text(encoding="utf-8"))) or ""
    lines = docstring.strip().splitlines()
    # title, underline, blank line, then the introduction
    underlined = len(lines) > 2 and set(lines[1].strip()) <= set("=-~")
    body = "\n".join(lines[2:]) if underlined else docstring
    return _first_sentence(body)


def section_title(section_dir: Path) -> str:
    readme = section_dir / "README.txt"
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.strip():
                return line.strip()
    return section_dir.name.replace("_", " ").capitalize()


def lessons_rst(examples_dir: Path, gallery_dir: str, sections: list[str]) -> list[str]:
    lines: list[str] = []
    for number, section in enumerate(sections, start=1):
        section_dir = examples_dir / section
        pages = sorted(section_dir.glob("[0-9]*.py"))
        title = section_title(section_dir)
        index = f"/{gallery_dir}/{section}/index"
        lines += [f"**{number}. {title}** (:doc:`the section <{index}>`)", ""]
        if not pages:
            lines += ["Pages coming.", ""]
        for page in pages:
            summary = page_summary(page)
            lines.append(f"* :doc:`/{gallery_dir}/{section}/{page.stem}`: {summary}")
        lines.append("")
    return lines


class LessonsDirective(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        config = env.config
        examples_dir = Path(config.lessons_examples_dir)
        for section in config.lessons_sections:  # rebuild the page when a lesson appears
            env.note_dependency(str(examples_dir / section))
            for page in sorted((examples_dir / section).glob("[0-9]*.py")):
                env.note_dependency(str(page))
        rst = lessons_rst(examples_dir, config.lessons_gallery_dir, config.lessons_sections)
        container = nodes.container()
        container["classes"].append("lesson-list")
        content = StringList(rst, source="lessons")
        self.state.nested_parse(content, self.content_offset, container)
        return [container]


def setup(app):
    app.add_config_value("lessons_examples_dir", "", "env")
    app.add_config_value("lessons_gallery_dir", "auto_examples", "env")
    app.add_config_value("lessons_sections", [], "env")
    app.add_directive("lessons", LessonsDirective)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
