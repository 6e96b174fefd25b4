"""
Exercise 12: Persistent matrix product
======================================

The tiled matmul of :ref:`exercise 9 <sphx_glr_auto_examples_exercises_09_tiled_matmul.py>`
made persistent: a fixed number of programs (on a GPU, one per SM), each looping over its
share of the tiles in the grouped order of :ref:`the matmul lesson
<sphx_glr_auto_examples_core_kernels_01_matmul.py>`. The checker fails a kernel that
computes the right product on any other grid.

.. automodule:: triton_guide.exercises.persistent_matmul
   :no-index:
"""

# %%
# The exercise in the package
# ---------------------------
# The statement above is the docstring of the exercise's module in
# ``triton_guide.exercises``, which also holds the torch reference and the cases;
# :func:`~triton_guide.exercises.get` finds it by name.

import torch

from triton_guide.exercises import check_file, check_mistake, get
from triton_guide.exercises.cases import plural
from triton_guide.exercises.persistent_matmul import tile_numbers

torch.manual_seed(0)
exercise = get("persistent_matmul")
print(f"exercise {exercise.number}: {exercise.name}: {exercise.summary}")

# %%
# Which program owns which tile
# -----------------------------
# The grouped order numbers the tiles down ``GROUP_SIZE_M`` tile rows before moving one
# tile column right; program ``pid`` then takes the tiles numbered ``pid``,
# ``pid + num_programs``, ... Here, for a ``200 x 200`` output in tiles of ``32 x 32``
# (7 x 7 tiles), ``GROUP_SIZE_M = 4`` and 5 programs: each tile's number, then the
# program that owns it (its number modulo 5). The checker, in the interpreter, compares
# this map with the program that stored each tile.

programs = 5
numbers = tile_numbers(200, 200, 32, 32, 4)
for title, table in [("tile numbers", numbers), (f"owner (of {programs} programs)",
                                                 numbers % programs)]:
    print(title)
    for row in table:
        print("  " + " ".join(f"{value:3d}" for value in row))
tiles = numbers.size
idle = programs - tiles % programs
print(f"{tiles} tiles on {programs} programs: {tiles // programs} full rounds, then one of "
      f"{tiles % programs} tiles, leaving {plural(idle, 'program')} without a tile")

# %%
# The stub
# --------
# Write the parts marked ``TODO``: the grouped order (``grouped_tile``) and ``solve`` are
# given. As it stands the stub stores nothing, so every case fails.
#
# .. literalinclude:: /../triton_guide/exercises/stubs/persistent_matmul.py
#    :language: python
#
# Save it, fill it in and check it:
#
# .. code-block:: bash
#
#    python -m triton_guide.exercises stub persistent_matmul > my_persistent_matmul.py
#    python -m triton_guide.exercises check persistent_matmul my_persistent_matmul.py
#
# The check exits with status 0 only when every case passes.

# %%
# The cases
# ---------
# The checker calls your ``solve`` once per case, on inputs drawn from a fresh seed
# every run (the report prints it; ``--seed`` replays it). The cases vary
# ``num_programs`` as well as the sizes: more tiles than programs, fewer, one program
# for every tile, and on a GPU the SM count.

for case in exercise.all_cases(torch.Generator().manual_seed(0)):
    print(f"{case.name:<26} {case.why}")

# %%
# What a failure looks like
# -------------------------
# The solution with one plausible mistake made in it, and the checker's report. The
# first is the tiled matmul itself: one program per tile gives the right product, and
# the checker refuses it for its grid. The tests check that each mistake listed here
# fails the case named beside it.

for mistake in exercise.mistakes:
    print(f"{mistake.name}: {mistake.explanation} ({mistake.caught()})")
mistake = exercise.mistakes[0]
print(f"\nthe solution with {mistake.name}: {mistake.old.strip()!r} became "
      f"{mistake.new.strip()!r}\n")
print(check_mistake(exercise, mistake, seed=0).text())

# %%
# A solution
# ----------
# Try it yourself first.
#
# .. dropdown:: Show a solution
#
#    .. literalinclude:: /../triton_guide/exercises/solutions/persistent_matmul.py
#       :language: python
#
# The checker's report on it:

print(check_file(exercise, exercise.solution_path, seed=0).text())

# %%
# Takeaways
# ---------
# * A persistent kernel is the tiled one inside a loop over tiles: the grid is fixed
#   (the SM count on a GPU) and ``range(pid, num_tiles, tl.num_programs(0))`` shares the
#   tiles out; the accumulator is zeroed per tile, and each tile is stored once.
# * The tile number goes through the grouped order before it becomes a tile row and
#   column, so that the programs working at the same moment still share tiles of ``a``
#   and ``b``.
# * When the programs do not divide the tiles evenly, the last round leaves some of them
#   without a tile, as the line under the tables counts.
#
# Used here: :func:`triton_guide.exercises.get`,
# :func:`triton_guide.exercises.check_file`,
# :func:`triton_guide.exercises.check_mistake`.
