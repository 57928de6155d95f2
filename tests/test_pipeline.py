"""A run, phase by phase (grader/pipeline.py `run`): the intake reads the download, prepare writes
the assignment, its due date and its late rule where the course keeps them, every submission goes
through the strategy's grade phase and is recorded one at a time, the outcomes are saved, and the
strategy is closed however the run ends. No kernel runs here: the strategy grades in-process."""
import nbformat
import pytest

from grader import pipeline, store
from grader.late_policy import penalty_config
from grader.samples import perfect_submission, release_notebook
from grader.submission import Options, Status, Submission
from support.grading import A1, DUE, grade_without_kernel


class InProcess(pipeline.Serial):
    """The grade phase without kernels; remembers what the run asked of it."""

    def __init__(self, fail_after=None):
        super().__init__()
        self.graded, self.closed, self.fail_after = [], False, fail_after

    def grade(self, batch, submissions):
        for submission in submissions:
            if self.fail_after is not None and len(self.graded) == self.fail_after:
                raise RuntimeError("the cluster went away")
            self.graded.append(submission.student)
            yield grade_without_kernel(submission, batch)

    def close(self):
        self.closed = True


@pytest.fixture
def download(course, tmp_path):
    folder = tmp_path / "download"
    folder.mkdir()
    nbformat.write(perfect_submission(course, A1), str(folder / "ada.ipynb"))
    nbformat.write(release_notebook(course, A1), str(folder / "bo.ipynb"))
    (folder / "notes.txt").write_text("not a notebook")
    return folder


def _options(**more):
    return Options(sandboxed=False, progress=False, **more)


def test_a_run_takes_in_prepares_grades_and_records(course, tmp_path, download):
    grading = course.with_grading_dir(tmp_path / "course")
    strategy, seen = InProcess(), []

    def look(intake):
        seen.append(sorted(s.student for s in intake.submissions))

    done = pipeline.run(grading, A1, download, _options(due=DUE, late_penalty=penalty_config("10%/day")),
                        strategy, after_intake=look)
    assert seen == [["ada", "bo"]] and sorted(strategy.graded) == ["ada", "bo"] and strategy.closed
    scores = {s.student: s.score for s in done.graded}
    assert scores["ada"] == done.graded[0].max_score > 0 and scores["bo"] == 0
    assert [s.status for s in done.intake.not_graded] == [Status.UNRECOGNISED]
    # prepare wrote the assignment and its due date into the gradebook, the rule into term.json
    assert store.due_date(grading.db_url, A1) == DUE
    assert A1 in store.load_term(grading)["penalties"]
    # record: into the course gradebook, and the outcomes saved, the unrecognised file among them
    assert store.students_with_submissions(grading.db_url, A1) == {"ada", "bo"}
    assert len(store.all_outcomes(grading)) == 3


def test_a_run_that_records_nothing_leaves_no_outcomes(course, tmp_path):
    grading = course.with_grading_dir(tmp_path / "course")
    path = tmp_path / "release.ipynb"
    nbformat.write(release_notebook(course, A1), str(path))
    done = pipeline.run(grading, A1, pipeline.given(Submission("release", path)), _options(), InProcess(),
                        recording=False)
    [graded] = done.graded
    assert graded.status == Status.GRADED and graded.score == 0
    assert store.all_outcomes(grading) == {}


def test_the_strategy_is_closed_when_grading_fails(course, tmp_path, download):
    strategy = InProcess(fail_after=1)
    with pytest.raises(RuntimeError, match="went away"):
        pipeline.run(course.with_grading_dir(tmp_path / "course"), A1, download, _options(), strategy)
    assert strategy.closed and len(strategy.graded) == 1


def test_warm_imports_come_from_the_source_notebooks_metadata(course, tmp_path):
    """a6's tests build Hugging Face's Llama (1.6 CPU-s of imports a kernel): its source notebook names those
    modules for the warm-kernel server; a1 names none; a list that is not of module names is refused, with
    the notebook named. Only the course's source notebooks are read, never a submission."""
    assert "transformers.models.llama.modeling_llama" in pipeline.warm_imports(course, ["a6_real_models"])
    assert pipeline.warm_imports(course, [A1]) == []
    both = pipeline.warm_imports(course, ["a6_real_models", A1, "a6_real_models"])
    assert both == pipeline.warm_imports(course, ["a6_real_models"])          # each module once
    broken = nbformat.read(str(course.source_notebook(A1)), as_version=4)
    broken.metadata["course"] = {"warm_imports": ["os; import shutil"]}
    other = type(course)(tmp_path)
    other.source_notebook(A1).parent.mkdir(parents=True)
    nbformat.write(broken, str(other.source_notebook(A1)))
    with pytest.raises(ValueError, match=f"{A1}.ipynb: the metadata course.warm_imports should be a list of module"):
        pipeline.warm_imports(other, [A1])
