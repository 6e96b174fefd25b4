"""triton_guide.page_imports: which package files a page uses, for the results store and the
site's page_deps extension alike."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from triton_guide.page_imports import PackageImports

FILES = {
    "__init__.py": "from .ops import add\nfrom .machinery import helper\nfrom . import sub\n",
    "ops.py": "from .kernels import add_kernel\nfrom .machinery import helper\n\n"
              "def add():\n    return add_kernel()\n",
    "kernels.py": "def add_kernel():\n    return 1\n",
    "machinery.py": "import os\n\ndef helper():\n    return 2\n",
    "unused.py": "X = 1\n",
    "sub/__init__.py": "from .deep import deep\n",
    "sub/deep.py": "from ..kernels import add_kernel\n\ndef deep():\n    return add_kernel()\n",
    "bench/__init__.py": "from .timing import timer\n",
    "bench/timing.py": "from ..machinery import helper\n\ndef timer():\n    return helper()\n",
}


@pytest.fixture
def imports(tmp_path) -> PackageImports:
    root = tmp_path / "toypkg"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return PackageImports(root)


def used(imports: PackageImports, page: str, exclude=()) -> list[str]:
    files = imports.used_by(textwrap.dedent(page), exclude=exclude)
    return [str(path.relative_to(imports.package_dir)) for path in files]


def test_a_name_from_the_package_is_followed_to_its_module_and_on(imports):
    assert used(imports, "from toypkg import add\n") == [
        "__init__.py", "kernels.py", "machinery.py", "ops.py"]


def test_the_init_is_used_but_not_followed(imports):
    # importing the package runs __init__ (which imports ops, sub, ...), but the page
    # uses none of them
    assert used(imports, "import toypkg\n") == ["__init__.py"]


def test_attribute_uses_through_an_alias(imports):
    page = """
        import toypkg as tp
        tp.add()
    """
    assert used(imports, page) == ["__init__.py", "kernels.py", "machinery.py", "ops.py"]


def test_a_submodule_imported_by_name(imports):
    assert used(imports, "from toypkg.kernels import add_kernel\n") == ["kernels.py"]
    assert used(imports, "import toypkg.kernels\n") == ["__init__.py", "kernels.py"]


def test_a_subpackage_name_goes_to_its_defining_module_and_relative_imports_climb(imports):
    assert used(imports, "from toypkg.sub import deep\n") == [
        "kernels.py", "sub/__init__.py", "sub/deep.py"]


def test_excluding_a_module_drops_it_and_what_only_it_imports(imports):
    assert used(imports, "from toypkg import add\n", exclude={"__init__", "machinery"}) == [
        "kernels.py", "ops.py"]


def test_excluding_a_subpackage_drops_everything_in_it(imports):
    page = "from toypkg.bench import timer\nfrom toypkg.kernels import add_kernel\n"
    assert used(imports, page) == [
        "bench/__init__.py", "bench/timing.py", "kernels.py", "machinery.py"]
    assert used(imports, page, exclude={"bench"}) == ["kernels.py"]


def test_other_packages_and_unused_modules_are_not_counted(imports):
    page = "import os\nimport toypkgs\nfrom toypkg_extra import add\n"
    assert used(imports, page) == []


def test_the_site_and_the_store_agree_on_the_real_pages():
    """page_deps (nothing excluded, plus literalincludes) lists every module that the
    store hashes as kernel source, for every page."""
    import importlib.util
    import sys

    from triton_guide import results

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("page_deps_under_test",
                                                  root / "docs" / "_ext" / "page_deps.py")
    page_deps = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = page_deps
    spec.loader.exec_module(page_deps)
    index = page_deps.PackageIndex("triton_guide", root / "triton_guide")
    pages = sorted((root / "examples").rglob("*.py"))
    assert pages
    for page in pages:
        deps = {str(p.relative_to(root)) for p in index.page_dependencies(page, root / "docs")}
        kernels = set(results.kernel_modules(page.read_text()))
        assert kernels <= deps, page.name
        top_level = {str(Path(k).relative_to("triton_guide").with_suffix("")) for k in kernels}
        assert not top_level & results.MACHINERY, page.name
