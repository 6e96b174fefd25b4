"""``python -m triton_guide.exercises list | stub NAME | solution NAME | check NAME FILE``.

``check`` takes ``--seed S`` to replay the inputs of an earlier run and ``--case CASE`` to
run one case only.
"""

from __future__ import annotations

import argparse
import sys

from . import NAMES, get
from .checker import SolveNotFound, check, load_solve

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
    check_parser = commands.add_parser("check", help="check the solve() defined in FILE")
    check_parser.add_argument("name", metavar="NAME")
    check_parser.add_argument("file", metavar="FILE")
    check_parser.add_argument("--seed", type=int, default=None,
                       help="replay the inputs of an earlier run (it prints its seed)")
    check_parser.add_argument("--case", default=None, metavar="CASE",
                              help="run only the case named CASE")
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
        solve = load_solve(arguments.file)
    except SolveNotFound as error:
        print(f"error: {error}", file=sys.stderr)
        return USAGE
    try:
        # Each line as soon as it is known: if solve kills the process, the lines so far stay.
        report = check(exercise, solve, seed=arguments.seed, only=arguments.case,
                       progress=lambda line: print(line, flush=True))
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return USAGE
    return PASSED if report.passed else FAILED


if __name__ == "__main__":
    sys.exit(main())
