"""Where everything lives, and the nbgrader configuration that says so.

solutions/ is nbgrader's source directory and assignments/ its release directory; every
grading-time folder and the gradebook live under course/, which git ignores.
"""
import os
from pathlib import Path

from traitlets.config import Config

# what makes a folder a course: its nbgrader configuration and its source notebooks
COURSE_MARKERS = ("nbgrader_config.py", "solutions")
PACKAGE_REPO = Path(__file__).resolve().parent.parent   # the checkout this package lives in


def is_course_root(path):
    path = Path(path)
    return (path / COURSE_MARKERS[0]).is_file() and (path / COURSE_MARKERS[1]).is_dir()


def find_course_root(start=None, environ=os.environ):
    """The course this command works on: $GRADER_COURSE_ROOT when set (it must be a course);
    else the nearest folder at or above `start` (default: the current directory) holding
    nbgrader_config.py and solutions/; else the checkout this package was imported from (so
    `python -m grader` in a repository clone works from anywhere)."""
    explicit = environ.get("GRADER_COURSE_ROOT")
    if explicit:
        root = Path(explicit).expanduser().resolve()
        if not is_course_root(root):
            raise SystemExit(f"GRADER_COURSE_ROOT={explicit} is not a course folder: expected "
                             f"{' and '.join(COURSE_MARKERS)} in it")
        return root
    try:
        here = Path(start or os.getcwd()).resolve()
    except FileNotFoundError:   # the current directory was deleted
        return PACKAGE_REPO
    for folder in (here, *here.parents):
        if is_course_root(folder):
            return folder
    return PACKAGE_REPO


REPO = find_course_root()
SOURCE_DIR = REPO / "solutions"
RELEASE_DIR = REPO / "assignments"
COURSE_DIR = REPO / "course"              # grading-time state, never committed
COURSE_ID = "attention-course"
CELL_TIMEOUT_S = 60                       # nbgrader/nbclient per-cell timeout
KERNEL_NAME = "python3"


def gradebook_url(course_dir=COURSE_DIR):
    find_alembic_head_in_process()
    return os.environ.get("GRADER_DB_URL") or f"sqlite:///{Path(course_dir) / 'gradebook.db'}"


def find_alembic_head_in_process():
    """nbgrader stamps every new gradebook with its schema's alembic revision, which it finds by
    running the `alembic` program: about 2.8 CPU-s each time (twice per graded batch), and a
    failure when the environment's bin folder is not on PATH. alembic's Python API gives the same
    answer from the same scripts; it is asked once per process."""
    import functools

    import nbgrader.api
    if getattr(nbgrader.api.get_alembic_version, "in_process", False):
        return

    @functools.cache
    def get_alembic_version():
        from alembic.config import Config as AlembicConfig
        from alembic.script import ScriptDirectory
        from nbgrader.dbutil import _temp_alembic_ini
        with _temp_alembic_ini("sqlite:///gradebook.db") as alembic_ini:
            return ScriptDirectory.from_config(AlembicConfig(alembic_ini)).get_current_head()

    get_alembic_version.in_process = True
    nbgrader.api.get_alembic_version = get_alembic_version


def apply_course_config(c, root=REPO, source_dir=SOURCE_DIR, release_dir=RELEASE_DIR,
                        course_dir=COURSE_DIR, db_url=None):
    """Fill a traitlets Config (nbgrader_config.py calls this too, so the nbgrader CLI and
    formgrader see the same course as `python -m grader`)."""
    find_alembic_head_in_process()
    course_dir = Path(course_dir)
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.source_directory = str(source_dir)
    c.CourseDirectory.release_directory = str(release_dir)
    c.CourseDirectory.submitted_directory = str(course_dir / "submitted")
    c.CourseDirectory.autograded_directory = str(course_dir / "autograded")
    c.CourseDirectory.feedback_directory = str(course_dir / "feedback")
    c.CourseDirectory.db_url = db_url or gradebook_url(course_dir)
    # the exchange: course/exchange by default (no root needed); a JupyterHub sets GRADER_EXCHANGE_ROOT
    # to the shared folder every user of the hub can reach (deploy/jupyterhub/)
    c.Exchange.root = os.environ.get("GRADER_EXCHANGE_ROOT") or str(course_dir / "exchange")
    c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", ".grader_records"]
    c.Execute.timeout = CELL_TIMEOUT_S
    c.Execute.interrupt_on_timeout = True
    c.ExecutePreprocessor.kernel_name = KERNEL_NAME
    c.ClearSolutions.code_stub = {
        "python": "# YOUR CODE HERE\nraise NotImplementedError(\"replace this line with your code\")"}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    # feedback shows each failed check's message, never the hidden test source (nbgrader #917)
    c.GenerateFeedback.preprocessors = [
        "nbgrader.preprocessors.GetGrades",
        "nbgrader.preprocessors.ClearHiddenTests",
        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    ]
    # one grading path: nbgrader's own autograde (its CLI, the Formgrader's button) runs this
    # course's sandboxed pipeline, never nbgrader's unsandboxed one (grader/nbgrader_autograde.py)
    from .nbgrader_autograde import route_autograde
    route_autograde(c)
    return c


def nbgrader_api(**overrides):
    """nbgrader's Python API on this course (about 3x faster than its CLI per call)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    config = apply_course_config(Config(), **overrides)
    coursedir = CourseDirectory(config=config)
    Path(coursedir.root).mkdir(parents=True, exist_ok=True)
    Path(config.Exchange.root).mkdir(parents=True, exist_ok=True)
    db_path = config.CourseDirectory.db_url.removeprefix("sqlite:///")
    if config.CourseDirectory.db_url.startswith("sqlite:///"):
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
    return NbGraderAPI(coursedir=coursedir, config=config)


def assignment_ids():
    """Every assignment that has a source notebook, in order."""
    return sorted(path.name for path in SOURCE_DIR.iterdir()
                  if (path / f"{path.name}.ipynb").exists()) if SOURCE_DIR.exists() else []


def ensure_venv_bin_on_path():
    """nbgrader runs `alembic` from PATH when it creates a gradebook."""
    import sys
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
