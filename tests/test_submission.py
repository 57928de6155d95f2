"""The record the stages pass along and the Options of a run (grader/submission.py): what a table
row says of it, what the outcomes file keeps, and options that refuse what they cannot take."""
import datetime
import json
from pathlib import Path

import pytest

from grader.submission import Engine, Intake, Kernels, Options, Status, Submission

WHEN = datetime.datetime(2026, 10, 2, 8, 30, tzinfo=datetime.UTC)


def test_options_read_their_enums_and_refuse_what_they_cannot_take():
    options = Options(kernels="cold", engine="threads")
    assert options.kernels is Kernels.COLD and options.engine is Engine.THREADS
    assert Options(scheduler="tcp://scheduler:8786").engine is Engine.DASK
    with pytest.raises(ValueError, match="kernels must be one of warm, cold, not 'tepid'"):
        Options(kernels="tepid")
    with pytest.raises(ValueError, match="cell-timeout must be at least 1, not 0"):
        Options(cell_timeout=0)
    assert Options(workers=3).parallel == 3 and Options().parallel >= 1


def test_a_label_says_how_it_ended_and_why():
    graded = Submission("ada", Path("ada.ipynb"), status=Status.GRADED, notes=["group Red"])
    assert graded.label == "graded (group Red)"
    assert Submission("bo", status=Status.NOT_GRADED, reason="no notebook").label == "not graded: no notebook"
    assert Submission("cy", status=Status.MISSING).label == "missing"


@pytest.mark.parametrize("fields, says", [
    ({}, "-"),
    ({"late": False}, "on time"),
    ({"late": True, "seconds_late": 30 * 3600, "penalty": 1.5}, "late 30.0 h, -1.5"),
    ({"late": True, "seconds_late": 600}, "late 10 min"),
    ({"time_unknown": True}, "time unknown"),
    ({"late": True, "time_unknown": True}, "late (the LMS says), time unknown"),
])
def test_the_late_column(fields, says):
    assert Submission("ada", **fields).late_label == says


def test_the_summary_is_plain_data_and_lightened_drops_what_stays_on_the_machine():
    submission = Submission("ada", Path("ada.ipynb"), status=Status.GRADED, submitted_at=WHEN, score=3.0,
                            notebook=object(), execution=object(), verdicts=[object()])
    summary = json.loads(json.dumps(submission.summary()))
    assert summary["status"] == "graded" and summary["submitted_at"] == WHEN.isoformat() and summary["score"] == 3.0
    light = submission.lightened()
    assert (light.notebook, light.execution, light.verdicts) == (None, None, []) and light.score == 3.0
    assert submission.notebook is not None, "the original keeps them"


def test_an_intake_lists_everyone_not_graded():
    missing, stranger = Submission("cy", status=Status.MISSING), Submission("zed", status=Status.NOT_ON_ROSTER)
    unread = Submission("readme.txt", status=Status.UNRECOGNISED)
    intake = Intake(Path("download"), missing=[missing], strangers=[stranger], unrecognised=[unread])
    assert intake.not_graded == [missing, stranger, unread]
