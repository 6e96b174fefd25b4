"""``python -m triton_guide.exercises list | stub NAME | solution NAME | check NAME FILE``."""

from __future__ import annotations

import argparse
import sys

from . import NAMES, check_file, get
from .checker import SolveNotFound

# Exit statuses: 0 every case passes; 1 a case fails; 2 the command itself is wrong.
PASSED, FAILED, USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m triton_guide.exercises",
        description="Triton exercises: print a stub, write the kernel, check it.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the exercises in order, with a one-line summary")
    for command in ("stub", "solution", "statement"):
        sub = commands.add_parser(command, help=f"print the {command} of exercise NAME")
        sub.add_argument("name", metavar="NAME")
    check = commands.add_parser("check", help="check the solve() defined in FILE")
    check.add_argument("name", metavar="NAME")
    check.add_argument("file", metavar="FILE")
    check.add_argument("--seed", type=int, default=None,
                       help="replay the inputs of an earlier run (it prints its seed)")
    arguments = parser.parse_args(argv)

    if arguments.command == "list":
        width = max(len(name) for name in NAMES)
        for name in NAMES:
            print(f"{name:<{width}}  {get(name).summary}")
        return PASSED

    try:
        exercise = get(arguments.name)
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return USAGE
    if arguments.command == "stub":
        print(exercise.stub_path.read_text(), end="")
        return PASSED
    if arguments.command == "solution":
        print(exercise.solution_path.read_text(), end="")
        return PASSED
    if arguments.command == "statement":
        print(exercise.statement)
        return PASSED

    try:
        report = check_file(exercise, arguments.file, seed=arguments.seed)
    except SolveNotFound as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE
    print(report.text())
    return PASSED if report.passed else FAILED


if __name__ == "__main__":
    sys.exit(main())
