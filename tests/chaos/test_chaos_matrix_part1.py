"""Part 1 of the chaos matrix: the scenarios at places 1, 5, 9... of ``MATRIX``.

A file of its own because pytest-xdist's ``--dist loadfile`` keeps a file on one worker (see
``PARTS``). Seeds follow the scenario's place in ``MATRIX``, so a scenario runs the same in any
file.
"""

from __future__ import annotations

from tests.chaos.test_chaos_matrix import MATRIX, PARTS, matrix_tests

test_chaos_matrix_100_jobs, test_chaos_matrix_1000_jobs = matrix_tests(MATRIX[1::PARTS])
