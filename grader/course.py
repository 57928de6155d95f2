"""Where everything lives, and the nbgrader configuration that says so.

solutions/ is nbgrader's source directory and assignments/ its release directory; every
grading-time folder and the gradebook live under course/, which git ignores.
"""
import os
from pathlib import Path

from traitlets.config import Config

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO / "solutions"
RELEASE_DIR = REPO / "assignments"
COURSE_DIR = REPO / "course"              # grading-time state, never committed
COURSE_ID = "attention-course"
CELL_TIMEOUT_S = 60                       # nbgrader/nbclient per-cell timeout
KERNEL_NAME = "python3"


def gradebook_url(course_dir=COURSE_DIR):
    return os.environ.get("GRADER_DB_URL") or f"sqlite:///{Path(course_dir) / 'gradebook.db'}"


def apply_course_config(c, root=REPO, source_dir=SOURCE_DIR, release_dir=RELEASE_DIR,
                        course_dir=COURSE_DIR, db_url=None):
    """Fill a traitlets Config (nbgrader_config.py calls this too, so the nbgrader CLI and
    formgrader see the same course as `python -m grader`)."""
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
