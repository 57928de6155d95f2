"""Grading engines and gradebooks beyond the default: a local Dask cluster, and the course
gradebook in a real PostgreSQL server (started by .ci/start_postgres.sh; in CI the test fails
rather than skips when it is missing)."""
import os
import uuid

import nbformat
import pytest

from grader.autograde import autograde
from grader.feedback import grade_rows
from grader.samples import buggy_submission, perfect_submission, release_notebook

AID = "a1_self_attention"
pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def three_students(tmp_path_factory):
    folder = tmp_path_factory.mktemp("students")
    nbformat.write(perfect_submission(AID), str(folder / "perfect.ipynb"))
    nbformat.write(release_notebook(AID), str(folder / "untouched.ipynb"))
    nbformat.write(buggy_submission(AID, "sin_cos_swapped")[0], str(folder / "buggy.ipynb"))
    return folder


def _scores(outcomes):
    return {o.student: o.score for o in outcomes}


def test_dask_local_cluster_grades_like_the_threads(three_students, tmp_path):
    outcomes = autograde(AID, three_students, course_dir=tmp_path / "course", progress=False,
                         engine="dask", workers=2)
    assert _scores(outcomes) == {"perfect": 18, "untouched": 0, "buggy": 16}
    rows, _ = grade_rows(tmp_path / "course")
    assert sorted(r["student"] for r in rows) == ["buggy", "perfect", "untouched"]


@pytest.fixture
def postgres_url():
    base = os.environ.get("GRADER_TEST_POSTGRES_URL")
    if not base:
        if os.environ.get("CI"):
            pytest.fail("CI must provide GRADER_TEST_POSTGRES_URL (.ci/start_postgres.sh)")
        pytest.skip("no PostgreSQL server: run `export GRADER_TEST_POSTGRES_URL=$(bash .ci/start_postgres.sh)`")
    import psycopg2
    name = f"gradebook_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(base)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {name}")
    # SQLAlchemy's default PostgreSQL driver is psycopg 3; the course pins psycopg2
    yield base.replace("postgresql://", "postgresql+psycopg2://", 1).rsplit("/", 1)[0] + "/" + name
    admin.cursor().execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


def test_postgresql_gradebook_with_parallel_graders(three_students, tmp_path, postgres_url, monkeypatch):
    monkeypatch.setenv("GRADER_DB_URL", postgres_url)
    outcomes = autograde(AID, three_students, course_dir=tmp_path / "course", progress=False, workers=2)
    assert _scores(outcomes) == {"perfect": 18, "untouched": 0, "buggy": 16}
    again = autograde(AID, three_students, course_dir=tmp_path / "course", progress=False, workers=2)
    assert _scores(again) == _scores(outcomes)        # re-grading updates, never duplicates
    rows, _ = grade_rows(tmp_path / "course")
    assert sorted((r["student"], r["total"]) for r in rows) == [("buggy", 16), ("perfect", 18), ("untouched", 0)]
    assert not (tmp_path / "course" / "gradebook.db").exists(), "the SQLite gradebook was used instead"
