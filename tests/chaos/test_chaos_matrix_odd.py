"""The chaos matrix's other half: the scenarios at odd places in ``MATRIX``.

A file of its own because pytest-xdist's ``--dist loadfile`` keeps a file on one worker: the
whole matrix in one file made it the suite's longest path. Seeds still follow the scenario's
place in ``MATRIX``, so a scenario runs the same in either file.
"""

from __future__ import annotations

from tests.chaos.test_chaos_matrix import MATRIX, matrix_tests

test_chaos_matrix_100_jobs, test_chaos_matrix_1000_jobs = matrix_tests(MATRIX[1::2])
