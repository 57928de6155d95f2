"""`autograde` (grader/autograde.py) around the run: one student kept for a regrade, the grading
strategy its options choose, and the table it prints."""
from pathlib import Path

import pytest

from grader import autograde, pipeline
from grader.engine import Dask
from grader.submission import Intake, Options, Status, Submission


def _intake():
    return Intake(Path("download"), submissions=[Submission("ada", Path("ada.ipynb"), login="101"),
                                                 Submission("bo", Path("bo.ipynb"), login="102")],
                  missing=[Submission("cy", status=Status.MISSING)],
                  unrecognised=[Submission("readme.txt", status=Status.UNRECOGNISED)])


def test_a_regrade_of_one_student_keeps_only_theirs():
    intake = _intake()
    autograde.only_student(intake, "102")                 # by the LMS's login too
    assert [s.student for s in intake.submissions] == ["bo"] and intake.not_graded == []
    with pytest.raises(ValueError, match="cy has no submission"):
        autograde.only_student(_intake(), "cy")
    with pytest.raises(ValueError, match="no submission of 'zed'.*it holds ada, bo"):
        autograde.only_student(_intake(), "zed")


def test_the_options_choose_the_strategy():
    threads = autograde.strategy(Options(workers=3))
    assert isinstance(threads, pipeline.Threads) and threads.workers == 3 and threads.servers
    dask = autograde.strategy(Options(engine="dask"))
    assert isinstance(dask, Dask) and not dask.servers
    dask.close()                                          # nothing started: closing is harmless


def test_the_table_shows_scores_late_and_what_failed():
    graded = Submission("ada", status=Status.GRADED, score=16, max_score=18, failed=["test_sin"], late=True,
                        seconds_late=7200, penalty=1.6)
    missing = Submission("cy", status=Status.MISSING, reason="Cy: no submission")
    table = autograde.format_table("a1_self_attention", [graded, missing]).splitlines()
    assert table[0] == "a1_self_attention" and table[1].split() == ["student", "score", "late", "outcome",
                                                                    "failed", "tests"]
    assert table[2].split()[:3] == ["ada", "16/18", "late"] and table[2].endswith("test_sin")
    assert table[3].split()[:2] == ["cy", "-"] and "missing: Cy: no submission" in table[3]
    assert autograde.count_statuses([graded, missing]) == {"graded": 1, "missing": 1}
