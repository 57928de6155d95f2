"""Feedback back to the LMS in one upload (grader/feedback.py, feedback_zip): each graded student's
page, named as Canvas's "Re-Upload Submissions" (the user id and the id of a file of their
submission, the first two all-digit parts of the name: canvas-lms
Assignment#infer_comment_context_from_filename) and Moodle's "Upload multiple feedback files in a
zip" (<name>_<participant id>_<plugin type>_<plugin name>_...: importziplib.php) match them."""
import dataclasses
import zipfile

import pytest

from grader import pipeline
from grader.feedback import FeedbackError, feedback_zip, generate_feedback
from grader.report import save_outcomes
from support.grading import A1, grade_without_kernel, open_batch, submission_file


@pytest.fixture(scope="module")
def returned(course, tmp_path_factory):
    """Two Canvas students (one anonymous), one Moodle participant and one from a plain folder,
    graded without kernels, their feedback pages written."""
    tmp = tmp_path_factory.mktemp("feedback")
    with open_batch(course, tmp) as batch:
        batch.prepare()
        template = grade_without_kernel(submission_file(course, tmp, "template"), batch)
        students = [
            dataclasses.replace(template, student="jdoe", login="101", preset="canvas",
                                lms_name=f"doejane_LATE_101_5001_{A1}-1.ipynb"),
            dataclasses.replace(template, student="anon_acJ4Q", login="anon_acJ4Q", preset="canvas",
                                lms_name=f"anon_acJ4Q_5003_{A1}.ipynb"),
            dataclasses.replace(template, student="jsmith", login="4712", preset="moodle",
                                lms_name="John Smith_4712_assignsubmission_file_"),
            dataclasses.replace(template, student="bkim", login="bkim", preset="folder", lms_name="bkim.ipynb"),
        ]
        graded = [pipeline.record(s, batch) for s in students]
        save_outcomes(batch.course, A1, graded)
        generate_feedback(batch.course, A1)
        return batch.course, tmp


def test_canvas_names_carry_the_user_and_the_submitted_file(returned):
    course, tmp = returned
    path, count, notes = feedback_zip(course, A1, "canvas", tmp / "canvas.zip")
    assert zipfile.ZipFile(path).namelist() == [f"doejane_101_5001_{A1}-feedback.html"]
    assert count == 1
    [note] = notes
    assert "anon_acJ4Q (the download's name" in note and "jsmith (not from a canvas download)" in note
    page = zipfile.ZipFile(path).read(f"doejane_101_5001_{A1}-feedback.html").decode()
    assert "BEGIN HIDDEN TESTS" not in page and A1 in page


def test_moodle_names_carry_the_participant(returned):
    course, tmp = returned
    path, count, _ = feedback_zip(course, A1, "moodle", tmp / "moodle.zip")
    [name] = zipfile.ZipFile(path).namelist()
    assert name == f"John Smith_4712_assignsubmission_file_{A1}-feedback.html"
    assert name.split("_", 4)[1:4] == ["4712", "assignsubmission", "file"], "Moodle's explode('_', name, 5)"


def test_nothing_to_return_says_what_to_run(course, tmp_path):
    with pytest.raises(FileNotFoundError, match="run autograde first"):
        feedback_zip(course.with_grading_dir(tmp_path), A1, "canvas", tmp_path / "x.zip")
    with pytest.raises(FeedbackError, match="choose one of canvas, moodle"):
        feedback_zip(course.with_grading_dir(tmp_path), A1, "blackboard", tmp_path / "x.zip")
