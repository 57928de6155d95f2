"""What every LMS format shares: the `Found` a format's file-name reader returns, the `LmsFormat`
protocol each module of grader/lms/ fills in (grader/lms/__init__.py lists them), and the helpers
the readers use."""
import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..times import parse_time

# what `nbgrader collect` stores beside a submission: when it was submitted, and the key nbgrader's
# release_feedback names the student's returned feedback by (kept with the graded notebook)
NBGRADER_KEYS = ("timestamp.txt", "submission_secret.txt")
SAFE_ID = re.compile(r"[^A-Za-z0-9_.@-]+")


@dataclass(frozen=True)
class LmsFormat:
    """One LMS, as the grader meets it. Only `name` is required; each part it leaves None is a
    thing that LMS does not do.

    name           what --lms takes, and `Submission.preset` of what it read ("canvas")
    user           how its people are named in messages ("Canvas user")
    read_name      (relative PurePosixPath, Path, assignment_id, zone) -> Found or None: one file of
                   its download, or None when the name is not one it writes
    auto           whether `--lms auto` tries read_name (an LMS before `folder` on a tie)
    feedback_name  (outcome, assignment_id) -> (file name in its bulk-upload zip, None), or
                   (None, why that student's page cannot go in it); `feedback --zip NAME`
    grades_export  whether `export --format NAME` writes its gradebook import (grader/export.py)
    """
    name: str
    user: str = "login"
    read_name: Callable | None = None
    auto: bool = True
    feedback_name: Callable | None = None
    grades_export: bool = False


@dataclass
class Found:
    """One file of the download, read by a preset."""
    path: Path
    login: str                                  # who, as the LMS names them (user id, username, nbgrader id)
    name: str = ""                              # a readable name, when the LMS gives one ("Jane Doe", "doejane")
    submitted_at: datetime.datetime | None = None   # aware (UTC) when known
    lms_late: bool | None = None                # the LMS's own late flag, where it writes one
    revision: int = 0                           # Canvas's re-upload suffix: -2 is later than -1
    preset: str = ""
    relative: PurePosixPath | None = None       # where it was in the download
    receipt: bool = False                       # the LMS's own note about the attempt, not a submission
    inside: str = ""                            # where in the student's upload it was: a subfolder or a zip
    problem: str = ""                           # why it is not read: a link (grader/safe_files.py), a file
                                                # too large to unpack, a student's zip that gave no notebook

    @property
    def attempt_key(self):
        """Orders one student's files: a notebook before anything else, then the latest."""
        when = self.submitted_at.timestamp() if self.submitted_at else float("-inf")
        return (self.path.suffix == ".ipynb", when, self.revision, self.path.name)


def plain_file(path):
    """A file that is no link (a link is never read: grader/safe_files.py)."""
    return path.is_file() and not path.is_symlink()


def try_time(text):
    try:
        return parse_time(text)
    except ValueError:
        return None


def unaddressed(outcome, lms, anonymous=False):
    """Why a student's feedback page cannot go into `lms`'s zip: its name does not say whom."""
    return (f"the download's name {outcome.get('lms_name')!r} does not say whom {lms} should give it to"
            + (": give --times the submissions JSON of an account with administrator access, which pairs "
               "anonymous ids with users" if anonymous else ""))
