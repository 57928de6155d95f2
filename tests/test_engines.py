"""Grading engines and gradebooks beyond the default: a local Dask cluster, and the course
gradebook in a real PostgreSQL server (started by .ci/start_postgres.sh; the test is marked
`postgres`, so CI, with REQUIRE_POSTGRES=1, fails rather than skips without one)."""
import uuid

import nbformat
import pytest

from grader.autograde import autograde
from grader.export import gather
from grader.samples import buggy_submission, perfect_submission, release_notebook
from grader.submission import Options
from support import COURSE
from support.system import postgres_url as server_url

AID = "a1_self_attention"
pytestmark = [pytest.mark.engine, pytest.mark.sandbox]


@pytest.fixture(scope="module")
def three_students(tmp_path_factory):
    folder = tmp_path_factory.mktemp("students")
    nbformat.write(perfect_submission(COURSE, AID), str(folder / "perfect.ipynb"))
    nbformat.write(release_notebook(COURSE, AID), str(folder / "untouched.ipynb"))
    nbformat.write(buggy_submission(COURSE, AID, "sin_cos_swapped")[0], str(folder / "buggy.ipynb"))
    return folder


def _scores(outcomes):
    return {o.student: o.score for o in outcomes}


def _gradebook_totals(course):
    """(student, total before any penalty) of every submission the course gradebook holds."""
    _, _, entries = gather(course)
    return sorted((entry.student, entry.raw_total) for entry in entries.values())


def test_dask_local_cluster_grades_like_the_threads(three_students, tmp_path):
    course = COURSE.with_grading_dir(tmp_path / "course")
    outcomes = autograde(course, AID, three_students, Options(progress=False, engine="dask", workers=2))
    assert _scores(outcomes) == {"perfect": 18, "untouched": 0, "buggy": 16}
    assert [student for student, _ in _gradebook_totals(course)] == ["buggy", "perfect", "untouched"]


@pytest.fixture
def postgres_url():
    import psycopg2
    base = server_url()    # the `postgres` marker skips the test without a server there
    name = f"gradebook_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(base)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    # SQLAlchemy's default PostgreSQL driver is psycopg 3; the course pins psycopg2
    yield base.replace("postgresql://", "postgresql+psycopg2://", 1).rsplit("/", 1)[0] + "/" + name
    admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


@pytest.mark.postgres
def test_postgresql_gradebook_with_parallel_graders(three_students, tmp_path, postgres_url, monkeypatch):
    monkeypatch.setenv("GRADER_DB_URL", postgres_url)
    course = COURSE.with_grading_dir(tmp_path / "course")
    outcomes = autograde(course, AID, three_students, Options(progress=False, workers=2))
    assert _scores(outcomes) == {"perfect": 18, "untouched": 0, "buggy": 16}
    again = autograde(course, AID, three_students, Options(progress=False, workers=2))
    assert _scores(again) == _scores(outcomes)        # re-grading updates, never duplicates
    assert _gradebook_totals(course) == [("buggy", 16), ("perfect", 18), ("untouched", 0)]
    assert not (tmp_path / "course" / "gradebook.db").exists(), "the SQLite gradebook was used instead"
