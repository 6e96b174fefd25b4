"""Where our host time per call goes: a cProfile, by own time, of each of report.py's host
cases (ours), after the host-time table that ``report.py --only host`` prints.

    python lab/host_profile.py [CASE ...]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import report  # noqa: E402


def main():
    report.host()
    cases = report.host_cases()
    for name in sys.argv[1:] or cases:
        ours, _ = cases[name]
        ours()
        print(f"\n--- {name}: 300 calls, by own time")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(300):
            ours()
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
