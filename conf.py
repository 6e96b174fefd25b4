"""Sphinx configuration for the triton-guide site (sources in docs/, examples in examples/)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import triton_guide  # noqa: E402  (decides GPU or interpreter before any example runs)
from sphinx_gallery.sorting import ExplicitOrder  # noqa: E402

# The gallery's section folders (examples/<section>/), in the order a newcomer reads them.
GALLERY_SECTIONS = ["basics", "core_kernels", "debugging", "exercises"]

project = "triton-guide"
author = "the triton-guide developers"
copyright = "2026, the triton-guide developers"
release = triton_guide.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "sphinx_gallery.gen_gallery",
    "sphinx_copybutton",
    "sphinx_design",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/**.ipynb", "auto_examples/**.py", "**/*.zip", "**/*.md5"]
myst_enable_extensions = ["colon_fence", "dollarmath"]

autodoc_typehints = "description"
autodoc_member_order = "bysource"
intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "triton-guide"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

sphinx_gallery_conf = {
    "examples_dirs": "../examples",  # paths here are relative to docs/
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/\d\d_",  # execute every numbered page
    # Sections in learning order; inside a section, pages by their number.
    "subsection_order": ExplicitOrder(
        [f"../examples/{section}" for section in GALLERY_SECTIONS]
    ),
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("triton_guide",),
    "backreferences_dir": "gen_modules/backreferences",
    "download_all_examples": False,
    "remove_config_comments": True,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "min_reported_time": 1,
    "show_memory": False,
    "abort_on_example_error": False,  # run every page, then fail the build listing all errors
    "only_warn_on_example_error": False,
}
