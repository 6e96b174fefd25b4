"""
Exercise 4: Column maxima and -inf padding
==========================================

A reduction down the columns with the 2D tiles of :ref:`the 2D lesson
<sphx_glr_auto_examples_basics_03_broadcasting_2d.py>`: each program owns a block of
columns and walks down the rows. The lanes that fall outside the matrix need a value
that can never win the maximum. ``tl.max`` along an axis and ``-inf`` padding are taught
on :ref:`the softmax page <sphx_glr_auto_examples_core_kernels_02_softmax.py>`, the loop
on :ref:`the reductions page <sphx_glr_auto_examples_core_kernels_06_reductions.py>`.

.. automodule:: triton_guide.exercises.column_max
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

torch.manual_seed(0)
exercise = get("column_max")
print(f"exercise {exercise.number}: {exercise.name}: {exercise.summary}")

# %%
# The stub
# --------
# Write the parts marked ``TODO``. As it stands the stub stores nothing, so every case
# fails.
#
# .. literalinclude:: /../triton_guide/exercises/stubs/column_max.py
#    :language: python
#
# Save it, fill it in and check it:
#
# .. code-block:: bash
#
#    python -m triton_guide.exercises stub column_max > my_column_max.py
#    python -m triton_guide.exercises check column_max my_column_max.py
#
# The check exits with status 0 only when every case passes.

# %%
# The cases
# ---------
# The checker calls your ``solve`` once per case, on inputs drawn from a fresh seed
# every run (the report prints it; ``--seed`` replays it). Outputs arrive filled with
# NaN, and every tensor sits between margins that reveal a store past its end.

for case in exercise.all_cases(torch.Generator().manual_seed(0)):
    print(f"{case.name:<22} {case.why}")

# %%
# What a failure looks like
# -------------------------
# The solution with one plausible mistake made in it, and the checker's report: the
# failing cases, then the arguments of the first one and its first wrong positions. The
# tests check that each mistake listed here fails the case named beside it.

for mistake in exercise.mistakes:
    print(f"{mistake.name}: {mistake.explanation} ({mistake.caught()})")
mistake = exercise.mistakes[0]
change = f"became {mistake.new.strip()!r}" if mistake.new.strip() else "was deleted"
print(f"\nthe solution with {mistake.name}: {mistake.old.strip()!r} {change}\n")
print(check_mistake(exercise, mistake, seed=0).text())

# %%
# A solution
# ----------
# Try it yourself first.
#
# .. dropdown:: Show a solution
#
#    .. literalinclude:: /../triton_guide/exercises/solutions/column_max.py
#       :language: python
#
# The checker's report on it:

print(check_file(exercise, exercise.solution_path, seed=0).text())

# %%
# Takeaways
# ---------
# * Pad with the identity of the reduction: 0 for a sum, ``-inf`` for a maximum,
#   ``+inf`` for a minimum. Padding a maximum with 0 is right as long as some value is
#   positive, which is why the checker has an ``all_negative`` case.
# * ``tl.max(tile, axis=0)`` reduces a 2D tile to one value per column.
#
# Used here: :func:`triton_guide.exercises.get`,
# :func:`triton_guide.exercises.check_file`,
# :func:`triton_guide.exercises.check_mistake`.
