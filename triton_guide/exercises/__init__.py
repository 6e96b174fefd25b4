"""Exercises: write a kernel, then let the checker try to break it.

Each exercise is a module here (its docstring is the statement) with a torch reference and
the checker's named cases; beside it, ``stubs/<name>.py`` is the file the reader starts
from and ``solutions/<name>.py`` a reference solution. Both define ``solve``, which takes
tensors already on the device, with the output preallocated (and filled with NaN by the
checker), and launches a kernel::

    python -m triton_guide.exercises list
    python -m triton_guide.exercises stub relu > my_relu.py     # fill in the TODOs
    python -m triton_guide.exercises check relu my_relu.py

Each module also lists ``MISTAKES``: plausible wrong versions of its solution (a missing
mask, a grid rounded down, a wrong stride), each with the case that must catch it. The
tests check that it does, so no checker passes everything.
"""

from __future__ import annotations

import importlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .cases import Mistake, Report
from .checker import check, load_solve

HERE = Path(__file__).resolve().parent

# The exercises on the basics, in the order of their lessons, then those on the core
# kernels, simplest first.
NAMES = [
    "scaled_add",
    "relu",
    "row_sum",
    "column_max",
    "outer_product",
    "transpose_strided",
    "matvec",
    "softmax_rows",
    "tiled_matmul",
    "atomic_sum",
    "online_logsumexp",
    "persistent_matmul",
]


@dataclass(frozen=True)
class Exercise:
    number: int
    name: str
    module: ModuleType

    @property
    def summary(self) -> str:
        """One line: what the exercise asks."""
        return self.module.SUMMARY

    @property
    def statement(self) -> str:
        """The statement with its constraints (the module's docstring)."""
        return self.module.__doc__

    @property
    def stub_path(self) -> Path:
        return HERE / "stubs" / f"{self.name}.py"

    @property
    def solution_path(self) -> Path:
        return HERE / "solutions" / f"{self.name}.py"

    @property
    def mistakes(self) -> list[Mistake]:
        return list(self.module.MISTAKES)

    @property
    def grid_dims(self) -> int | None:
        """How many dimensions the statement asks the grid to have (None: any)."""
        return getattr(self.module, "GRID_DIMS", None)

    @property
    def exact_dot(self) -> bool:
        """Whether the interpreter multiplies float32 ``tl.dot`` operands exactly (the
        statement asks for ``tl.dot`` and says so) instead of rounding them to tf32 first,
        as a GPU does."""
        return getattr(self.module, "EXACT_DOT", False)

    @property
    def read_once(self) -> tuple[str, ...]:
        """The inputs whose elements a kernel may read only once (checked in the interpreter)."""
        return tuple(getattr(self.module, "READ_ONCE", ()))

    @property
    def write_once(self) -> tuple[str, ...]:
        """The outputs whose elements a kernel may store only once (checked in the
        interpreter)."""
        return tuple(getattr(self.module, "WRITE_ONCE", ()))

    @property
    def launch_rules(self):
        """The exercise's own check of what ``solve`` launched (``launch_rules(case,
        launches, stored_by)``: a failing ``CaseResult`` or None), or None if it has none."""
        return getattr(self.module, "launch_rules", None)

    def reference(self, **inputs):
        """The expected output, from the inputs (float64 tensors and scalars)."""
        return self.module.reference(**inputs)

    def tolerance(self, **inputs) -> tuple[float, float]:
        """``(rtol, atol)`` for comparing the output of these inputs with the reference."""
        return self.module.tolerance(**inputs)

    def cases(self, generator):
        """The named cases, with inputs drawn from ``generator``."""
        return self.module.cases(generator)

    def largest_cases(self):
        """Dry cases at the statement's largest sizes (see ``cases.largest``)."""
        return list(getattr(self.module, "LARGEST", ()))

    def all_cases(self, generator):
        """Every case the checker runs, in its order: the named cases, then the dry ones."""
        return self.cases(generator) + self.largest_cases()

    def check_command(self, path: str = "my_solution.py") -> str:
        return f"python -m triton_guide.exercises check {self.name} {path}"

    def mistake_source(self, mistake: Mistake) -> str:
        """The source of the reference solution with ``mistake`` made in it."""
        source = self.solution_path.read_text()
        if source.count(mistake.old) != 1:
            raise ValueError(f"{self.name}: mistake {mistake.name!r} must replace exactly one "
                             f"occurrence of {mistake.old!r}")
        return source.replace(mistake.old, mistake.new)


def get(name: str) -> Exercise:
    """The exercise called ``name``; ``KeyError`` listing the names if there is none."""
    if name not in NAMES:
        raise KeyError(f"no exercise named {name!r}; the exercises are: {', '.join(NAMES)}")
    module = importlib.import_module(f"{__name__}.{name}")
    return Exercise(NAMES.index(name) + 1, name, module)


def all_exercises() -> list[Exercise]:
    return [get(name) for name in NAMES]


def check_file(exercise: Exercise, path, *, seed: int | None = None,
               only: str | None = None) -> Report:
    """Check the ``solve`` defined in the file at ``path`` (``only`` as in ``check``)."""
    return check(exercise, load_solve(path), seed=seed, only=only)


def check_mistake(exercise: Exercise, mistake: Mistake, *, seed: int | None = None,
                  only: str | None = None) -> Report:
    """Check the reference solution with ``mistake`` made in it (``only`` as in ``check``)."""
    # triton.jit reads a kernel's source from its file, so the variant must be a real file.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{exercise.name}_{mistake.name}.py"
        path.write_text(exercise.mistake_source(mistake))
        return check_file(exercise, path, seed=seed, only=only)


__all__ = ["NAMES", "Exercise", "Mistake", "all_exercises", "check", "check_file",
           "check_mistake", "get", "load_solve"]
