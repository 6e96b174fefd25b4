"""
Exercise 3: Row sums with strides
=================================

One program per row, with :ref:`the grid
<sphx_glr_auto_examples_basics_02_grid_math.py>` that follows, and a loop: a row can be
longer than any block a program holds, so it is summed a block at a time. The matrix may
be a strided view, as in :ref:`the 2D lesson
<sphx_glr_auto_examples_basics_03_broadcasting_2d.py>`. The loop, ``tl.sum`` and a
masked load's ``other=0.0`` are taught later, on :ref:`the reductions page
<sphx_glr_auto_examples_core_kernels_06_reductions.py>` (its ``program_sum``); read
that first if they are new to you.

.. automodule:: triton_guide.exercises.row_sum
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
exercise = get("row_sum")
print(f"exercise {exercise.number}: {exercise.name}: {exercise.summary}")

# %%
# The stub
# --------
# Write the parts marked ``TODO``. As it stands the stub stores nothing, so every case
# fails.
#
# .. literalinclude:: /../triton_guide/exercises/stubs/row_sum.py
#    :language: python
#
# Save it, fill it in and check it:
#
# .. code-block:: bash
#
#    python -m triton_guide.exercises stub row_sum > my_row_sum.py
#    python -m triton_guide.exercises check row_sum my_row_sum.py
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
#    .. literalinclude:: /../triton_guide/exercises/solutions/row_sum.py
#       :language: python
#
# The checker's report on it:

print(check_file(exercise, exercise.solution_path, seed=0).text())

# %%
# Takeaways
# ---------
# * Address elements through the strides (``row * stride_row + col * stride_col``),
#   never through the shape: a slice or a transpose has the same shape and another
#   layout.
# * Keep one partial sum per lane inside the loop and reduce the lanes once, after it;
#   masked lanes load ``other=0.0``, which adds nothing.
#
# Used here: :func:`triton_guide.exercises.get`,
# :func:`triton_guide.exercises.check_file`,
# :func:`triton_guide.exercises.check_mistake`.
