"""Where a course lives: one `Course` object, found once by the command line and passed down.

solutions/ is nbgrader's source directory and assignments/ its release directory; every
grading-time folder and the gradebook live in the grading folder (course/ by default), which git
ignores. The nbgrader configuration here is the one nbgrader_config.py loads too, so `nbgrader ...`
and the Formgrader see the same course as `python -m grader`.
"""
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from traitlets.config import Config

from . import store

# what makes a folder a course: its nbgrader configuration and its source notebooks
COURSE_MARKERS = ("nbgrader_config.py", "solutions")
PACKAGE_REPO = Path(__file__).resolve().parent.parent   # the checkout this package lives in
DEFAULT_COURSE_ID = "attention-course"
COURSE_ID_VARIABLE = "GRADER_COURSE_ID"   # one course id per course on a shared hub (deploy/jupyterhub/)
CELL_TIMEOUT_S = 60                       # nbgrader/nbclient per-cell timeout
KERNEL_NAME = "python3"
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError(\"replace this line with your code\")"


def course_id(environ=None):
    """The course's nbgrader id: $GRADER_COURSE_ID when set, else "attention-course". It names the
    course's folder in nbgrader's exchange, so two courses on one hub need two ids; the hub sets it
    in every server it starts (deploy/jupyterhub/users.txt), and nbgrader_config.py, the students'
    nbgrader configuration and `python -m grader` all read it from here."""
    value = (os.environ if environ is None else environ).get(COURSE_ID_VARIABLE, "").strip()
    if not value:
        return DEFAULT_COURSE_ID
    if "/" in value or value.startswith(".") or any(ch.isspace() for ch in value):
        raise ValueError(f"{COURSE_ID_VARIABLE}={value!r} is not a course id: it names a folder of nbgrader's "
                         "exchange, so no '/', no spaces and no leading '.' (e.g. attention-course-2026)")
    return value


class CourseNotFound(RuntimeError):
    """No course folder where one was named; the message says what a course folder holds."""


def is_course_root(path):
    path = Path(path)
    return (path / COURSE_MARKERS[0]).is_file() and (path / COURSE_MARKERS[1]).is_dir()


@dataclass(frozen=True)
class Course:
    """A course folder: `root` holds nbgrader_config.py, solutions/, assignments/, lectures/,
    mutants/ and alternatives/; `grading_dir` (default root/course) the gradebook, submitted/,
    autograded/, feedback/, the class roster, outcomes and reports."""
    root: Path
    grading_dir: Path | None = None
    course_id: str = dataclasses.field(default_factory=course_id)
    # $GRADER_DB_URL, read once when the Course is made (with_grading_dir makes a new one)
    database: str | None = dataclasses.field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root).resolve())
        grading = Path(self.grading_dir).resolve() if self.grading_dir else self.root / "course"
        object.__setattr__(self, "grading_dir", grading)
        object.__setattr__(self, "database", os.environ.get("GRADER_DB_URL") or None)

    @classmethod
    def find(cls, start=None, environ=None, grading_dir=None):
        """The course a command works on: $GRADER_COURSE_ROOT when set (it must be a course);
        else the nearest folder at or above `start` (default: the current directory) holding
        nbgrader_config.py and solutions/; else the checkout this package was imported from (so
        `python -m grader` in a repository clone works from anywhere)."""
        environ = os.environ if environ is None else environ
        explicit = environ.get("GRADER_COURSE_ROOT")
        if explicit:
            root = Path(explicit).expanduser().resolve()
            if not is_course_root(root):
                raise CourseNotFound(f"GRADER_COURSE_ROOT={explicit} is not a course folder: expected "
                                     f"{' and '.join(COURSE_MARKERS)} in it")
            return cls(root, grading_dir)
        try:
            here = Path(start or os.getcwd()).resolve()
        except FileNotFoundError:   # the current directory was deleted
            return cls(PACKAGE_REPO, grading_dir)
        for folder in (here, *here.parents):
            if is_course_root(folder):
                return cls(folder, grading_dir)
        return cls(PACKAGE_REPO, grading_dir)

    def with_grading_dir(self, grading_dir):
        """The same course graded into another folder (a demo, a test, a scratch batch)."""
        return dataclasses.replace(self, grading_dir=Path(grading_dir))

    # ---- its folders ----
    @property
    def source_dir(self):
        return self.root / "solutions"

    @property
    def release_dir(self):
        return self.root / "assignments"

    @property
    def lectures_dir(self):
        return self.root / "lectures"

    @property
    def mutants_dir(self):
        return self.root / "mutants"

    @property
    def alternatives_dir(self):
        return self.root / "alternatives"

    def source_notebook(self, assignment_id):
        return self.source_dir / assignment_id / f"{assignment_id}.ipynb"

    def release_notebook(self, assignment_id):
        return self.release_dir / assignment_id / f"{assignment_id}.ipynb"

    def assignment_ids(self):
        """Every assignment that has a source notebook, in order."""
        if not self.source_dir.exists():
            return []
        return sorted(path.name for path in self.source_dir.iterdir() if (path / f"{path.name}.ipynb").exists())

    # ---- its gradebook and nbgrader's view of it ----
    @property
    def db_url(self):
        """The course gradebook: $GRADER_DB_URL (PostgreSQL for several graders), else SQLite in
        the grading folder."""
        return self.database or store.sqlite_url(self.grading_dir)

    def nbgrader_config(self, config=None, release_dir=None, db_url=None):
        """Fill a traitlets Config with this course (nbgrader_config.py calls this too)."""
        store.patch_nbgrader()
        c = config if config is not None else Config()
        c.CourseDirectory.course_id = self.course_id
        c.CourseDirectory.root = str(self.root)
        c.CourseDirectory.source_directory = str(self.source_dir)
        c.CourseDirectory.release_directory = str(release_dir or self.release_dir)
        c.CourseDirectory.submitted_directory = str(self.grading_dir / "submitted")
        c.CourseDirectory.autograded_directory = str(self.grading_dir / "autograded")
        c.CourseDirectory.feedback_directory = str(self.grading_dir / "feedback")
        c.CourseDirectory.db_url = db_url or self.db_url
        # the exchange: <grading folder>/exchange by default (no root needed); a JupyterHub sets
        # GRADER_EXCHANGE_ROOT to the shared folder every user of the hub can reach (deploy/jupyterhub/)
        c.Exchange.root = os.environ.get("GRADER_EXCHANGE_ROOT") or str(self.grading_dir / "exchange")
        c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".grader_records"]
        c.Execute.timeout = CELL_TIMEOUT_S
        c.Execute.interrupt_on_timeout = True
        c.ExecutePreprocessor.kernel_name = KERNEL_NAME
        c.ClearSolutions.code_stub = {"python": CODE_STUB}
        c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
        # feedback shows each failed check's message, never the hidden test source (nbgrader #917), nor
        # the answer key of a task cell's mark scheme (a debugging lab's findings), which autograde puts back
        c.GenerateFeedback.preprocessors = [
            "nbgrader.preprocessors.GetGrades",
            "nbgrader.preprocessors.ClearHiddenTests",
            "nbgrader.preprocessors.ClearMarkScheme",
            "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
        ]
        # and shows what a student wrote (Markdown, outputs) without running any of it
        from .feedback_html import FeedbackExporter
        c.GenerateFeedback.exporter_class = FeedbackExporter
        # one grading path: nbgrader's own autograde (its CLI, the Formgrader's button) runs this
        # course's sandboxed pipeline, never nbgrader's unsandboxed one (grader/nbgrader_autograde.py)
        from .nbgrader_autograde import route_autograde
        route_autograde(c)
        return c

    def nbgrader_api(self, release_dir=None, db_url=None):
        """nbgrader's Python API on this course (about 3x faster than its CLI per call)."""
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory

        config = self.nbgrader_config(release_dir=release_dir, db_url=db_url)
        coursedir = CourseDirectory(config=config)
        Path(config.Exchange.root).mkdir(parents=True, exist_ok=True)
        if config.CourseDirectory.db_url.startswith("sqlite:///"):
            Path(config.CourseDirectory.db_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return NbGraderAPI(coursedir=coursedir, config=config)

    def late_penalty_config(self):
        """The late-penalty sections of the course's nbgrader_config.py, as nbgrader loads it (None
        without one)."""
        from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader
        try:
            return PyFileConfigLoader("nbgrader_config.py", path=str(self.root)).load_config()
        except ConfigFileNotFound:
            return None


def apply_course_config(c, root=None):
    """nbgrader_config.py's one line: the course at `root` (default: found from the current
    directory) configures nbgrader."""
    course = Course(root) if root is not None else Course.find()
    return course.nbgrader_config(c)
