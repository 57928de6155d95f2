"""A term as an instructor runs it, through the command line: a roster, realistic LMS downloads for
two assignments, late work and its penalty, the exports an LMS imports, manual grades that survive
re-grading. Real sandboxed kernels grade the notebooks (about a minute on two cores); each stage's
own rules are tested without kernels in tests/stages/."""
import csv
import datetime
import io
import json
import warnings
import zipfile
from contextlib import redirect_stdout

import nbformat
import pytest

from grader import store
from grader.cli import main
from grader.samples import buggy_submission, perfect_submission
from grader.submission import Status
from support import COURSE
from support.grading import ROSTER as COURSE_ROSTER

pytestmark = [pytest.mark.sandbox, pytest.mark.kernel]

A1, A3 = "a1_self_attention", "a3_flops_io"
DUE = datetime.datetime(2026, 10, 1, 23, 59, tzinfo=datetime.timezone.utc)
ROSTER = "".join(COURSE_ROSTER.splitlines(keepends=True)[:4])     # its first three students


def _bytes(nb):
    return nbformat.writes(nb).encode()


def _zip(path, members, built=DUE + datetime.timedelta(days=2)):
    """members: (name in the zip, notebook). As Canvas and Moodle build their zips, every entry is
    stamped with the moment of the download: here two days after the deadline."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, nb in members:
            archive.writestr(zipfile.ZipInfo(name, date_time=built.astimezone().timetuple()[:6]), _bytes(nb))
    return path


def _canvas_times(path, times):
    """Canvas's submissions API saved as JSON: {user id: aware submission time}."""
    path.write_text(json.dumps([{"user_id": int(uid), "submitted_at": when.isoformat(), "late": when > DUE}
                                for uid, when in times.items()]))
    return path


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """Roster, then a Canvas download of a1 (its times from Canvas's submissions API) and a Moodle
    download of a3 (its participants and times from the grading worksheet), graded by the CLI."""
    root = tmp_path_factory.mktemp("term")
    course = root / "course"
    (root / "roster.csv").write_text(ROSTER)
    before, after = DUE - datetime.timedelta(hours=1), DUE + datetime.timedelta(hours=30)
    buggy, _ = buggy_submission(COURSE, A1, "sin_cos_swapped")
    canvas = _zip(root / "canvas_a1.zip", [
        ("doejane_101_5001_a1_self_attention.ipynb", buggy),                                # first try
        ("doejane_101_5001_a1_self_attention-1.ipynb", perfect_submission(COURSE, A1)),    # re-upload
        ("smithjohn_LATE_102_5002_a1_self_attention.ipynb", perfect_submission(COURSE, A1)),
        ("strangerbob_999_5003_a1_self_attention.ipynb", perfect_submission(COURSE, A1)),
        # swilson (103) skipped a1
    ])
    times = _canvas_times(root / "a1_submissions.json", {"101": before, "102": after, "999": before})
    # Moodle's folder numbers are the assignment's participant ids, not user ids (4711 is Jane)
    moodle = _zip(root / "moodle_a3.zip", [
        ("Jane Doe_4711_assignsubmission_file_/a3_flops_io.ipynb", perfect_submission(COURSE, A3)),
        ("John Smith_4712_assignsubmission_file_/my_a3.ipynb", perfect_submission(COURSE, A3)),
        ("Participant_4713_assignsubmission_file/a3_flops_io.ipynb", perfect_submission(COURSE, A3)),
    ])
    (root / "a3_worksheet.csv").write_text(
        'Identifier,"Full name","Email address",Status,"Last modified (submission)"\n'
        '"Participant 4711","Jane Doe",jane.doe@uni.example,Submitted,"Thursday, 1 October 2026, 8:00 PM"\n'
        '"Participant 4712","John Smith",john.smith@uni.example,Submitted,"Thursday, 1 October 2026, 9:00 PM"\n'
        '"Participant 4713","Sam Wilson",Sam.Wilson@uni.example,Submitted,"Thursday, 1 October 2026, 9:30 PM"\n')
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["roster", "import", str(root / "roster.csv"), "--course-dir", str(course)]) == 0
        assert main(["autograde", A1, str(canvas), "--lms", "auto", "--due", DUE.isoformat(), "--times", str(times),
                     "--late-penalty", "10%/day", "--course-dir", str(course), "--workers", "2"]) == 0
        assert main(["autograde", A3, str(moodle), "--lms", "moodle", "--worksheet", str(root / "a3_worksheet.csv"),
                     "--lms-timezone", "UTC", "--course-dir", str(course), "--workers", "2"]) == 0
    return root, course, out.getvalue()


def _csv(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _export(course, fmt, root, *ids):
    target = root / f"grades-{fmt}.csv"
    with redirect_stdout(io.StringIO()):
        assert main(["export", *ids, "--format", fmt, "--output", str(target), "--course-dir", str(course)]) == 0
    return _csv(target)


def test_the_canvas_download_maps_to_roster_ids(term):
    _, course, printed = term
    a1 = json.loads((course / "outcomes" / f"{A1}.json").read_text())
    assert a1["jdoe"]["status"] == Status.GRADED and a1["jdoe"]["score"] == a1["jdoe"]["max_score"], a1["jdoe"]
    assert "a1_self_attention-1.ipynb" in a1["jdoe"]["label"] and "not graded" in a1["jdoe"]["label"], \
        "the re-upload was graded and the earlier file listed"
    assert a1["swilson"]["status"] == Status.MISSING
    [stranger] = [o for o in a1.values() if o["status"] == Status.NOT_ON_ROSTER]
    assert "999" in stranger["student"] and "strangerbob" in stranger["student"]
    assert "not on the roster" in printed and "missing" in printed


def test_the_class_report_shows_late_missing_and_strangers(term):
    _, course, _ = term
    from grader.report import build_report
    page = build_report(COURSE.with_grading_dir(course), A1).read_text()
    students = page.split("<h2>Students</h2>", 1)[1]
    assert "late 30.0 h, -3.6 points" in students and "on time" in students
    assert "<td>missing</td>" in students and "<td>not on the roster</td>" in students


def test_the_stranger_never_enters_the_gradebook(term):
    _, course, _ = term
    with warnings.catch_warnings(), store.gradebook(COURSE.with_grading_dir(course).db_url) as gb:
        warnings.simplefilter("ignore")
        assert sorted(s.id for s in gb.students) == ["jdoe", "jsmith", "swilson"]


def test_late_work_is_flagged_and_penalised(term):
    root, course, _ = term
    rows = _export(course, "long", root)
    header = rows[0]
    by = {(r[0], r[1]): dict(zip(header, r)) for r in rows[1:]}
    late = by[("jsmith", A1)]
    assert late["late"] == "yes" and float(late["seconds_late"]) == pytest.approx(30 * 3600, abs=2)
    # 30 hours late = 2 started days at 10 %/day: 20 % of the raw total
    assert float(late["penalty"]) == pytest.approx(0.2 * float(late["raw_total"]))
    assert float(late["total"]) == pytest.approx(0.8 * float(late["raw_total"]))
    on_time = by[("jdoe", A1)]
    assert on_time["late"] == "" and on_time["penalty"] == "" and on_time["total"] == on_time["raw_total"]
    assert by[("swilson", A1)]["status"] == "missing" and by[("swilson", A1)]["total"] == ""


def test_wide_export_one_row_per_roster_student(term):
    root, course, _ = term
    rows = _export(course, "wide", root)
    assert rows[0] == ["student", A1, A3, "late", "missing", "provisional"]
    by = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert sorted(by) == ["jdoe", "jsmith", "swilson"]
    assert by["jsmith"]["late"] == A1 and by["jdoe"]["late"] == ""
    assert by["swilson"]["missing"] == A1 and by["swilson"][A1] == "" and by["swilson"][A3] != ""
    assert by["jdoe"][A3] == by["jsmith"][A3] == by["swilson"][A3], "the renamed Moodle file was graded too"
    # written answers are not graded yet: every submitted total is provisional
    assert set(by["jdoe"]["provisional"].split()) == {A1, A3}


def test_canvas_and_moodle_imports(term):
    root, course, _ = term
    canvas = _export(course, "canvas", root)
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[1][0] == "Points Possible"
    ids = {r[1]: r for r in canvas[2:]}
    assert sorted(ids) == ["101", "102", "103"] and ids["101"][0] == "Doe, Jane"
    moodle = _export(course, "moodle", root, A3)
    assert moodle[0] == ["First name", "Last name", "Email address", A3]
    assert sorted(r[2] for r in moodle[1:]) == ["jane.doe@uni.example", "john.smith@uni.example",
                                                 "sam.wilson@uni.example"]
    a1 = _export(course, "moodle", root, A1)
    assert sorted(r[2] for r in a1[1:]) == ["jane.doe@uni.example", "john.smith@uni.example"], \
        "swilson, missing a1, is left out: an empty cell would clear a grade in Moodle"


def test_regrading_one_student_leaves_the_others_as_they_were(term, tmp_path):
    root, course, _ = term
    before = json.loads((course / "outcomes" / f"{A1}.json").read_text())
    one = _zip(tmp_path / "one.zip", [("smithjohn_LATE_102_5002_a1_self_attention.ipynb",
                                       perfect_submission(COURSE, A1))])
    times = _canvas_times(tmp_path / "times.json", {"102": DUE + datetime.timedelta(hours=30)})
    with redirect_stdout(io.StringIO()) as printed:
        assert main(["autograde", A1, str(one), "--times", str(times), "--course-dir", str(course),
                     "--workers", "1"]) == 0
    assert "missing" in printed.getvalue() and "jdoe" not in printed.getvalue(), \
        "jdoe was graded before: not missing"
    after = json.loads((course / "outcomes" / f"{A1}.json").read_text())
    assert after["jdoe"]["status"] == before["jdoe"]["status"] == Status.GRADED
    assert after["swilson"]["status"] == Status.MISSING


def test_regrading_keeps_manual_grades(term):
    root, course, _ = term
    url = COURSE.with_grading_dir(course).db_url
    with warnings.catch_warnings(), store.gradebook(url) as gb:
        warnings.simplefilter("ignore")
        grade = gb.find_grade("written_permutation", A1, A1, "jdoe")
        grade.manual_score = 2
        gb.db.commit()
        before = gb.find_submission(A1, "jdoe").score
    with redirect_stdout(io.StringIO()):
        assert main(["autograde", A1, str(root / "canvas_a1.zip"), "--times", str(root / "a1_submissions.json"),
                     "--course-dir", str(course), "--workers", "2"]) == 0
    with warnings.catch_warnings(), store.gradebook(url) as gb:
        warnings.simplefilter("ignore")
        assert gb.find_grade("written_permutation", A1, A1, "jdoe").manual_score == 2
        assert gb.find_submission(A1, "jdoe").score == before


def test_nbgrader_keys_reach_the_feedback_folder(tmp_path):
    """nbgrader's release_feedback needs timestamp.txt and submission_secret.txt beside each
    student's feedback; collect must not take the secret for a submission of its own."""
    from grader.feedback import generate_feedback
    folder = tmp_path / "submitted" / "alice" / A1
    folder.mkdir(parents=True)
    nbformat.write(perfect_submission(COURSE, A1), str(folder / f"{A1}.ipynb"))
    (folder / "timestamp.txt").write_text("2026-10-01 12:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("s3cr3t")
    course = tmp_path / "course"
    with redirect_stdout(io.StringIO()) as printed:
        assert main(["autograde", A1, str(tmp_path / "submitted"), "--course-dir", str(course),
                     "--workers", "1"]) == 0
    assert "unrecognised" not in printed.getvalue() and "not graded" not in printed.getvalue(), printed.getvalue()
    generate_feedback(COURSE.with_grading_dir(course), A1)
    feedback = course / "feedback" / "alice" / A1
    assert (feedback / "timestamp.txt").read_text().startswith("2026-10-01")
    assert (feedback / "submission_secret.txt").read_text() == "s3cr3t"
