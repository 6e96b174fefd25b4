"""Add ``code_sha256`` (triton_guide.results.code_fingerprint) to recordings made before the
field existed, where git can show exactly the code that ran: for each recording with a
commit, every module it lists is read from that commit with ``git show``, and only when
each file's sha256 equals the one the recording stored (the recording's own proof that this
is the source it ran) is the fingerprint of those files written into it. Recordings whose
files do not match, or that were made from a checkout with local changes, are left as they
are and listed.

    python lab/code_hashes.py [triton_guide/_results]
"""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from triton_guide.results import code_fingerprint

ROOT = Path(__file__).resolve().parent.parent


def source_at(commit: str, path: str) -> bytes | None:
    run = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True)
    return run.stdout if run.returncode == 0 else None


def main(folder: Path) -> None:
    for path in sorted(folder.glob("*/*.json")):
        record = json.loads(path.read_text())
        kernel = record.get("kernel_source", {})
        if "code_sha256" in kernel:
            continue
        commit, modules = record.get("commit"), kernel.get("modules", {})
        if not commit or record.get("dirty") or not modules:
            print(f"left as is (commit {commit}, dirty {record.get('dirty')}): {path}")
            continue
        sources = {module: source_at(commit, module) for module in modules}
        if any(data is None or hashlib.sha256(data).hexdigest() != modules[module]
               for module, data in sources.items()):
            print(f"left as is (files at {commit} differ from those recorded): {path}")
            continue
        kernel["code_sha256"] = code_fingerprint([data.decode() for data in sources.values()])
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"added ({commit}): {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "triton_guide" / "_results")
