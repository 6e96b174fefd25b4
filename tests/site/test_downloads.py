"""The built site as a learner meets it: install the package from it, run what it offers.

The site in ``_build/html`` (``make html`` first; ``make test`` does both) is served on the
address it was built for (``TRITON_GUIDE_SITE_URL``, a loopback address). Then, as a new
user would:

* a fresh virtual environment gets ``triton_guide`` with the command printed on the page
  "Run the examples on your machine", from the served site. So that PyTorch is not
  downloaded and installed a second time, the environment sees the packages of the
  environment running these tests (torch, triton, numpy, matplotlib, nbclient, ipykernel)
  through a folder of links to them, leaving out that environment's own ``triton_guide``:
  pip finds every dependency satisfied and fetches only the wheel;
* every script the site offers for download is fetched from the server and run from an
  empty folder, and several notebooks are executed (nbclient), all in that environment
  (the interpreter, without a GPU); each must finish with status 0;
* the vector addition download, with its kernel edited to subtract, must fail its check;
* the exercise checker runs from the installed package.

Skipped when there is no built site, failed instead where ``REQUIRE_SITE_TESTS=1`` (CI).
``SITE_TEST_ONLY=01_vector_add,02_softmax`` runs those scripts only (on a GPU, where every
page takes longer); ``SITE_TEST_REPORT=runs.json`` writes each script's status, time and
last output lines there.
"""

from __future__ import annotations

import ast
import functools
import html
import http.server
import ipaddress
import json
import os
import re
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.parse
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("TRITON_GUIDE_SITE", ROOT / "_build" / "html"))
SETUP_PAGE = "setup.html"
CODE_MARK = "# -- as code --"
# Notebooks executed (at least three), chosen among the quicker pages of different sections.
NOTEBOOKS = ["01_vector_add", "02_softmax", "02_relu"]
SCRIPT_TIMEOUT = 600


def _cannot_run(reason: str):
    message = f"site tests cannot run: {reason}"
    if os.environ.get("REQUIRE_SITE_TESTS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def install_command() -> str:
    """The ``pip install ...`` line shown on the page "Run the examples on your machine"."""
    page = (SITE / SETUP_PAGE).read_text(encoding="utf-8")
    commands = {_text(block).strip() for block in re.findall(r"<pre>(.*?)</pre>", page, re.S)}
    (command,) = [c for c in commands if re.fullmatch(r"pip install \S+\.whl", c)]
    return command


# -- the server -----------------------------------------------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    requested: list[str] = []

    def log_message(self, format, *args):  # noqa: A002  (the base class's name)
        _Handler.requested.append(self.path)


@pytest.fixture(scope="session")
def served_site(tmp_path_factory):
    """The site served at the address its pages give; yields that address."""
    if not (SITE / SETUP_PAGE).is_file() or not list((SITE / "dist").glob("*.whl")):
        _cannot_run(f"no built site with a dist/ folder in {SITE} (run `make html` first)")
    url = urllib.parse.urlsplit(install_command().split()[-1])
    base = url.path.rsplit("/dist/", 1)[0]
    host = url.hostname or ""
    try:
        loopback = ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except OSError:
        loopback = False
    if not loopback:
        _cannot_run(f"the site was built for {url.scheme}://{url.netloc}{base}/, which is not "
                    "this machine: build it with TRITON_GUIDE_SITE_URL=http://127.0.0.1:PORT/")
    # Serve the site under the path the address names (a site may live below /name/).
    root = tmp_path_factory.mktemp("served")
    mount = root.joinpath(*[part for part in base.split("/") if part])
    mount.parent.mkdir(parents=True, exist_ok=True)
    if mount == root:
        root = SITE
    else:
        mount.symlink_to(SITE.resolve(), target_is_directory=True)
    handler = functools.partial(_Handler, directory=str(root))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", url.port or 80), handler)
    except OSError as error:
        pytest.fail(f"cannot serve the site on port {url.port}, the port its pages give "
                    f"({error}): free it, or rebuild with TRITON_GUIDE_SITE_URL set to "
                    "another port")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"{url.scheme}://{url.netloc}{base}/"
    server.shutdown()
    server.server_close()


# -- the learner's environment --------------------------------------------------------------


def _dependency_folder(folder: Path) -> Path:
    """Links to every package this interpreter has, except triton_guide itself."""
    folder.mkdir()
    sources = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
               *site.getsitepackages()]
    sources += [p for p in os.environ.get("SITE_TEST_EXTRA_PATHS", "").split(os.pathsep) if p]
    for source in dict.fromkeys(sources):
        if not Path(source).is_dir():
            continue
        for entry in sorted(Path(source).iterdir()):
            name = entry.name.lower()
            if (name.startswith(("triton_guide", "triton-guide", "__editable__"))
                    or name == "__pycache__"
                    or (folder / entry.name).exists()):
                continue
            (folder / entry.name).symlink_to(entry)
    return folder


def _clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "TRITON_INTERPRET", "PYTHONSTARTUP")}
    env.update(MPLBACKEND="Agg", **extra)
    return env


@pytest.fixture(scope="session")
def learner(served_site, tmp_path_factory):
    """A fresh virtual environment with triton_guide installed by the page's command."""
    base = tmp_path_factory.mktemp("learner")
    venv = base / "venv"
    # Without pip (and, on Python 3.11, an old setuptools) of its own: pip, like the rest,
    # comes through the folder of links, and installs into the new environment.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    deps = _dependency_folder(base / "deps")
    Path(purelib, "learner_deps.pth").write_text(
        f"import site; site.addsitedir({str(deps)!r})\n")
    command = install_command()
    assert command.startswith(f"pip install {served_site}dist/"), (command, served_site)
    started = time.perf_counter()
    _Handler.requested.clear()
    # The page's command, run by the new environment's pip. Every dependency is there
    # already, so pip needs no index (PIP_NO_INDEX: a machine without network fails fast).
    argv = [python, "-m", *command.split()]
    done = subprocess.run(argv, cwd=base, capture_output=True, text=True,
                          env=_clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1"))
    print(f"`{command}` took {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    wheel = command.split("/")[-1]
    assert any(path.endswith(f"/dist/{wheel}") for path in _Handler.requested), \
        f"pip did not fetch the wheel from the site: {_Handler.requested}"
    return python


@pytest.fixture(scope="session")
def downloads(served_site, tmp_path_factory):
    """Every file the gallery pages link as a download, fetched from the server."""
    folder = tmp_path_factory.mktemp("downloads")
    found: dict[str, Path] = {}
    for page in sorted((SITE / "auto_examples").glob("*/*.html")):
        for link in re.findall(r'href="([^"]*_downloads/[^"]+\.(?:py|ipynb|zip))"',
                               page.read_text()):
            target = (page.parent / link).resolve().relative_to(SITE.resolve())
            name = target.name
            if name in found:
                continue
            data = urllib.request.urlopen(served_site + target.as_posix(), timeout=30).read()
            found[name] = folder / name
            found[name].write_bytes(data)
    return found


def _run(python: Path, script: Path, workdir: Path) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    assert not any(workdir.iterdir()), f"{workdir} is not empty"
    local = workdir / script.name
    shutil.copy(script, local)
    started = time.perf_counter()
    # Scripts run side by side: one thread each for torch and numpy, so that they do not
    # crowd each other out of the cores.
    done = subprocess.run([python, local.name], cwd=workdir, capture_output=True, text=True,
                          timeout=SCRIPT_TIMEOUT, env=_clean_env(OMP_NUM_THREADS="1"))
    done.seconds = time.perf_counter() - started
    return done


def _chosen(names: list[str]) -> list[str]:
    only = [s for s in os.environ.get("SITE_TEST_ONLY", "").split(",") if s]
    return [n for n in names if not only or Path(n).stem in only]


@pytest.fixture(scope="session")
def script_runs(learner, downloads, tmp_path_factory):
    """Every downloaded script, each run in an empty folder (two at a time)."""
    base = tmp_path_factory.mktemp("runs")
    scripts = {name: downloads[name] for name in _chosen(sorted(downloads))
               if name.endswith(".py")}
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        futures = {name: pool.submit(_run, learner, path, base / Path(name).stem)
                   for name, path in scripts.items()}
        runs = {name: future.result() for name, future in futures.items()}
    print(f"{len(runs)} downloaded scripts ran in {time.perf_counter() - started:.0f} s:")
    for name, run in sorted(runs.items(), key=lambda item: -item[1].seconds):
        print(f"  {run.seconds:6.1f} s  exit {run.returncode}  {name}")
    if os.environ.get("SITE_TEST_REPORT"):
        Path(os.environ["SITE_TEST_REPORT"]).write_text(json.dumps({
            name: {"returncode": run.returncode, "seconds": round(run.seconds, 2),
                   "stdout_tail": run.stdout[-1500:], "stderr_tail": run.stderr[-1500:]}
            for name, run in runs.items()}, indent=1))
    return runs


# -- the tests ------------------------------------------------------------------------------


def test_the_page_gives_one_command_and_every_download_uses_it(served_site, downloads):
    command = install_command()
    assert re.fullmatch(rf"pip install {re.escape(served_site)}dist/triton_guide-[^/]+\.whl",
                        command), command
    scripts = [p for p in downloads.values() if p.suffix == ".py"]
    zips = [p for p in downloads.values() if p.suffix == ".zip"]
    notebooks = [p for p in downloads.values() if p.suffix == ".ipynb"]
    first_lines = {p.name: "\n".join(p.read_text().splitlines()[:8]) for p in scripts}
    first_cells = {p.name: "".join(json.loads(p.read_text())["cells"][0]["source"])
                   for p in notebooks}
    assert (len(scripts) >= 20, len(notebooks) == len(scripts) == len(zips)) == (True, True)
    differ = []
    for archive in zips:  # the zip holds the same two files
        with zipfile.ZipFile(archive) as opened:
            differ += [f"{archive.name}: {member}" for member in opened.namelist()
                       if opened.read(member) != downloads[Path(member).name].read_bytes()]
    assert differ == []
    assert [n for n, text in first_lines.items() if command not in text] == []
    assert [n for n, text in first_cells.items() if f"%{command}" not in text] == []
    pages = [p.read_text() for p in SITE.rglob("*.html")]
    assert [n for n, page in enumerate(pages) if "git+https://" in page] == []


def test_the_package_comes_from_the_site(learner, tmp_path):
    where = subprocess.run(
        [learner, "-c", "import triton_guide, triton_guide.results as r; "
                        "print(triton_guide.__file__); print(len(list(r.results_dir().glob('*/*.json'))))"],
        cwd=tmp_path, capture_output=True, text=True, env=_clean_env(), check=True).stdout.split()
    installed, recordings = Path(where[0]), int(where[1])
    assert (ROOT in installed.parents, "site-packages" in installed.parts, recordings > 0) == (
        False, True, True), where


def _page_scripts() -> list[str]:
    return sorted(p.name for p in (ROOT / "examples").glob("*/[0-9][0-9]_*.py"))


@pytest.mark.parametrize("name", _chosen(_page_scripts()))
def test_every_downloaded_script_runs_from_an_empty_folder(script_runs, name):
    assert name in script_runs, f"{name} is not offered for download"
    run = script_runs[name]
    assert run.returncode == 0, (f"{name} exited with {run.returncode}:\n"
                                 f"{run.stdout[-2000:]}\n{run.stderr[-4000:]}")


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_downloaded_notebook_executes(learner, downloads, tmp_path, stem):
    notebook = downloads[f"{stem}.ipynb"]
    shutil.copy(notebook, tmp_path / notebook.name)
    code = ("import sys, nbformat, nbclient\n"
            "nb = nbformat.read(sys.argv[1], as_version=4)\n"
            "nbclient.NotebookClient(nb, timeout=600, kernel_name='python3').execute()\n"
            "print(sum(c.cell_type == 'code' for c in nb.cells), 'code cells ran')\n")
    done = subprocess.run([learner, "-c", code, notebook.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, env=_clean_env())
    assert done.returncode == 0, f"{notebook.name}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_an_edit_to_the_downloaded_kernel_changes_what_runs(learner, downloads, tmp_path):
    script = downloads["01_vector_add.py"].read_text()
    block = script[script.index(CODE_MARK):]
    block = block[:block.index("use_local(")]
    assert block.count("x + y, mask=mask)") == 1, block
    edited = script.replace(block, block.replace("x + y, mask=mask)", "x - y, mask=mask)"))
    path = tmp_path / "src" / "01_vector_add.py"
    path.parent.mkdir()
    path.write_text(edited)
    run = _run(learner, path, tmp_path / "run")
    assert (run.returncode != 0, "AssertionError" in run.stderr) == (True, True), run.stderr[-2000:]


def _package_source(module: str, name: str) -> str:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return "\n".join(lines[first - 1:node.end_lineno])


def test_kernels_in_the_downloads_are_the_ones_the_site_shows(downloads):
    checked = []
    for name, path in downloads.items():
        if path.suffix == ".py":
            blocks = path.read_text().split(CODE_MARK)[1:]
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            blocks = ["".join(c["source"]).split(CODE_MARK, 1)[1] for c in cells
                      if c["cell_type"] == "code" and CODE_MARK in "".join(c["source"])]
        else:
            continue
        for block in blocks:
            module, kernel = re.search(r'^use_local\("([\w.]+)", (\w+)\)$', block, re.M).groups()
            code = block[:block.index("\nuse_local(")]
            start = re.search(r"^@", code, re.M).start()
            shown = _package_source(module, kernel)
            assert code[start:].strip() == shown.strip(), f"{name}: {kernel} differs from {module}"
            page = (SITE / "auto_examples").glob(f"*/{Path(name).stem}.html")
            page_text = re.sub(r"\s+", " ", _text(next(page).read_text()))
            assert re.sub(r"\s+", " ", shown) in page_text, f"{name}: the page does not show {kernel}"
            checked.append((name, kernel))
    scripts = sorted(c for c in checked if c[0].endswith(".py"))
    notebooks = sorted((n.replace(".ipynb", ".py"), k) for n, k in checked if n.endswith(".ipynb"))
    assert (("01_vector_add.py", "vector_add_kernel") in scripts, scripts == notebooks) == (
        True, True), (scripts, notebooks)
    print(f"{len(scripts)} kernels checked in the scripts and the notebooks: {scripts}")


def test_the_exercise_checker_runs_from_the_installed_package(learner, tmp_path):
    def exercises(*args: str, out: Path | None = None) -> int:
        done = subprocess.run([learner, "-m", "triton_guide.exercises", *args], cwd=tmp_path,
                              capture_output=True, text=True, env=_clean_env(), timeout=600)
        if out is not None:
            out.write_text(done.stdout)
        return done.returncode

    statuses = (exercises("stub", "relu", out=tmp_path / "stub.py"),
                exercises("solution", "relu", out=tmp_path / "solution.py"),
                exercises("check", "relu", "stub.py"),
                exercises("check", "relu", "solution.py"))
    assert statuses == (0, 0, 1, 0)


def test_the_published_distributions_pass_twine_check():
    pytest.importorskip("twine")
    files = sorted((SITE / "dist").glob("triton_guide-*"))
    assert sorted(p.suffix for p in files) == [".gz", ".whl"], files
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_distributions_carry_the_license_they_declare():
    wheel, = (SITE / "dist").glob("triton_guide-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert b"License-Expression: MIT" in metadata
    (license_file,) = [n for n in names if n.endswith("/licenses/LICENSE")]
    with zipfile.ZipFile(wheel) as archive:
        assert b"MIT License" in archive.read(license_file)
