"""Sphinx configuration for the triton-guide site (sources in docs/, examples in examples/)."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # this site's own Sphinx extensions

import triton_guide  # noqa: E402  (decides GPU or interpreter before any example runs)
from downloads import install_command  # noqa: E402
from sphinx_gallery.sorting import ExplicitOrder  # noqa: E402

# The one setting every install command derives from: the address this site is served at.
# The wheel and sdist of triton_guide are published under <it>/dist/ (docs/_ext/downloads.py).
# Unset, it is where `python -m http.server 8000 --directory _build/html` serves a local build.
SITE_URL_ENV = "TRITON_GUIDE_SITE_URL"
html_baseurl = os.environ.get(SITE_URL_ENV) or "http://localhost:8000/"

# The gallery's section folders (examples/<section>/), in the order a newcomer reads them.
GALLERY_SECTIONS = ["basics", "core_kernels", "hopper", "debugging", "exercises"]

project = "triton-guide"
author = "the triton-guide developers"
copyright = "2026, the triton-guide developers"
release = triton_guide.__version__  # pyproject.toml reads the same attribute

# `pip install <site>/dist/triton_guide-<release>-py3-none-any.whl`
INSTALL_COMMAND = install_command(html_baseurl, "triton-guide", release)
# The first cell of every notebook (sphinx-gallery writes it; downloads.py keeps it current).
FIRST_NOTEBOOK_CELL = (
    "# Install triton_guide, built with this site, into this notebook's environment.\n"
    "# Without a CUDA GPU the kernels run in Triton's interpreter on the CPU.\n"
    f"%{INSTALL_COMMAND}"
)

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "sphinx_gallery.gen_gallery",
    "sphinx.ext.viewcode",  # [source] links on the API page
    "sphinx_copybutton",
    "sphinx_design",
    "page_deps",  # re-run a page when triton_guide code it uses changes (docs/_ext)
    "downloads",  # the package served with the site; downloads run on their own
    "notebooks",  # kernel source inlined into the downloadable notebooks
    "thumbnails",  # a section picture for pages that draw no figure
    "api_links",  # triton_guide.softmax -> its description as triton_guide.softmax.softmax
    "lessons",  # the {lessons} list on the front page
]
lessons_examples_dir = str(ROOT / "examples")
lessons_sections = GALLERY_SECTIONS
page_deps_package = "triton_guide"
page_deps_package_dir = str(ROOT / "triton_guide")
api_links_packages = ["triton_guide"]
downloads_package_dir = str(ROOT / "triton_guide")
downloads_dist_name = "triton-guide"
downloads_version = release
downloads_project_root = str(ROOT)
downloads_first_cell = FIRST_NOTEBOOK_CELL

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_ext", "_static", "auto_examples/**.ipynb", "auto_examples/**.py", "**/*.zip", "**/*.md5",
                    "**sg_execution_times.rst"]  # left over from builds that wrote them
myst_enable_extensions = ["colon_fence", "dollarmath"]

autodoc_typehints = "description"
autodoc_member_order = "bysource"
intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = "triton-guide"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # Lesson pages need the width for code (see docs/_static/custom.css); their sections
    # are listed in the left column instead.
    # (patterns may not overlap, hence "every page not under auto_examples/" spelled out)
    "secondary_sidebar_items": {
        "[!a]**": ["page-toc", "sourcelink"],
        "a[!u]**": ["page-toc", "sourcelink"],
        "auto_examples/**": [],
    },
}
html_context = {"default_mode": "auto"}  # light or dark as the reader's system says
html_favicon = "docs/_static/favicon.svg"
html_sidebars = {"auto_examples/**": ["sidebar-nav-bs", "page-toc"]}
html_static_path = ["docs/_static"]  # relative to this file
html_css_files = ["custom.css"]
html_search_scorer = str(ROOT / "docs" / "_static" / "search_scorer.js")
# MathJax served from the site itself, so that math renders offline (docs/_static/mathjax).
mathjax_path = "mathjax/tex-chtml.js"
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

def gallery_jobs() -> int | bool:
    """How many pages run at once: TRITON_GUIDE_GALLERY_JOBS, else one per CPU core on a
    machine without a GPU (no nvidia-smi) and one (False) on a GPU machine."""
    jobs = os.environ.get("TRITON_GUIDE_GALLERY_JOBS")
    if jobs:
        return int(jobs) if int(jobs) > 1 else False
    if shutil.which("nvidia-smi") or importlib.util.find_spec("joblib") is None:
        return False
    return os.cpu_count() if (os.cpu_count() or 1) > 1 else False


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
    # Pages print what they mean to show; the value of a cell's last expression (the
    # Generator from torch.manual_seed, the table summary() returns) is not shown.
    "capture_repr": (),
    "matplotlib_animations": False,
    "min_reported_time": 1,
    "show_memory": False,
    # No "Computation times" pages: they would outrank the lessons in search.
    "write_computation_times": False,
    # Notebooks start by installing the package, so that they run as downloaded.
    "first_notebook_cell": FIRST_NOTEBOOK_CELL,
    # Without a GPU, pages run under the interpreter, one per CPU core (joblib): their
    # outputs are the same whatever runs beside them. On a GPU one at a time, so that no
    # page's timings share the GPU with another page.
    "parallel": gallery_jobs(),
    "abort_on_example_error": False,  # run every page, then fail the build listing all errors
    "only_warn_on_example_error": False,
}
