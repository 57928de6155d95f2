"""Grading a1 without kernels, for the stage tests (tests/stages/): every stage runs for real except
execute, whose kernel is replaced by the trusted in-process runner the quality gate uses (it records
what the notebook's test cells observe, exactly as the recorder in a kernel does)."""
import datetime

import nbformat

from grader import pipeline
from grader.inprocess import run_in_process
from grader.samples import buggy_submission, perfect_submission, release_notebook
from grader.stages.execute import Execution
from grader.submission import Options, Submission

A1 = "a1_self_attention"
# five students as an instructor's roster CSV lists them (grader/roster.py), with their LMS user ids
ROSTER = """id,first_name,last_name,email,lms_user_id
jdoe,Jane,Doe,jane.doe@uni.example,101
jsmith,John,Smith,john.smith@uni.example,102
swilson,Sam,Wilson,sam.wilson@uni.example,103
bkim,Bo,Kim,bo.kim@uni.example,104
alee,Ann,Lee,ann.lee@uni.example,105
"""
DUE = datetime.datetime(2026, 10, 1, 23, 59, tzinfo=datetime.timezone.utc)


def open_batch(course, tmp_path, **options):
    """An a1 Batch graded into its own folder, unsandboxed (no kernel runs here), not prepared."""
    return pipeline.Batch(course.with_grading_dir(tmp_path / "course"), A1,
                          Options(sandboxed=False, progress=False, **options))


def submission_file(course, folder, student, kind="perfect"):
    """A Submission of `student` whose notebook is a1's perfect answer, its untouched release, or a
    catalogued mutant's name."""
    nb = (perfect_submission(course, A1) if kind == "perfect" else release_notebook(course, A1)
          if kind == "release" else buggy_submission(course, A1, kind)[0])
    path = folder / f"{student}.ipynb"
    nbformat.write(nb, str(path))
    return Submission(student, path, login=student, preset="folder")


def execute_in_process(submission, batch):
    """Stands in for the execute stage: the sanitized notebook run by the trusted in-process runner,
    each test cell's kernel code from the batch's split, as the execute stage sends it."""
    records, _ = run_in_process(submission.notebook, split=batch.trace.split)
    submission.execution = Execution(submission.notebook, records)
    return submission


def grade_without_kernel(submission, batch):
    """pipeline.grade with execute_in_process for the execute stage."""
    stages = [execute_in_process if stage.__name__ == "execute" else stage for stage in pipeline.GRADE]
    return pipeline.grade(submission, batch, stages=stages)
