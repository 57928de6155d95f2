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
    roster         its class list export, read by `roster import` (a CsvForm: grader/roster.py)
    groups         its group set export, read by `autograde --groups` (a CsvForm: grader/groups.py)
    export         its gradebook import, written by `export --format NAME` (a GradesExport: grader/export.py)

    How its names say who submitted (grader/stages/identify.py, collect.py, groups.py):
    default_id     (submission) -> the student's id without a roster; None: the login made safe
    roster_name    (roster student) -> their name as the download writes it, to match by name when no
                   id matches; None: never matched by name
    login_is_user  whether the login in its names is a user's (matched against the roster's ids);
                   Moodle's is the assignment's own participant number
    anonymous      (submission) -> whether the LMS hides who this is (anonymous grading)
    anonymous_advice  (logins, reach) -> the warning for submissions graded under its anonymous ids
    anonymous_prefix  the login prefix of an anonymous name its records can pair with a user ("anon_")
    team_folders   whether a team's file comes in a folder named by the team (Moodle): its number is
                   the group's, its members' own rows are in the grading worksheet, and DEFAULT_TEAM's
                   folder holds the students in no group
    """
    name: str
    user: str = "login"
    read_name: Callable | None = None
    auto: bool = True
    feedback_name: Callable | None = None
    roster: "CsvForm | None" = None
    groups: "CsvForm | None" = None
    export: "GradesExport | None" = None
    default_id: Callable | None = None
    roster_name: Callable | None = None
    login_is_user: bool = True
    anonymous: Callable | None = None
    anonymous_advice: Callable | None = None
    anonymous_prefix: str = ""
    team_folders: bool = False


@dataclass(frozen=True)
class CsvForm:
    """An LMS's CSV export of people (its class list, or a group set), as `roster import` and
    `--groups` read it.

    what     how the message listing the forms a file may take names it ("Canvas's gradebook export (...)")
    matches  (lowered, stripped header cells) -> whether a file with this first row is in this form
    rows     (lowered header, data rows) -> for a class list [(line number, {RosterStudent field: value})];
             for a group set [(group name, {Member field: value})]
    nobody   what to add when a group set in this form puts nobody in a group
    """
    what: str
    matches: Callable
    rows: Callable
    nobody: str = ""


@dataclass(frozen=True)
class GradesExport:
    """An LMS's gradebook import, as `export --format NAME` writes it (grader/export.py gathers the
    people, the assignment names and the entries; each entry has status, total, max_score, shown_total).

    rows            (people, names, entries) -> (header, rows)
    notes           (people, names, entries) -> what the instructor must know (who was left out, why)
    one_assignment  a file holds one assignment only (Moodle's import clears a grade for an empty cell)
    template        (path, people, names, entries, template, maps) -> (path, rows written, notes): the
                    instructor's own export of the gradebook filled in (`--template`), or None
    """
    rows: Callable
    notes: Callable | None = None
    one_assignment: bool = False
    template: Callable | None = None


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


def records(header, rows):
    """(line number, {header cell: stripped value}) of the non-empty data rows of a CSV."""
    for line, row in enumerate(rows, start=2):
        values = {h: (v or "").strip() for h, v in zip(header, row) if h}
        if any(values.values()):
            yield line, values


def slug(text):
    """Letters and digits, lowercased: how names are compared ("Team 7" is "team7")."""
    return re.sub(r"[^a-z0-9]", "", (text or "").lower())


def named_id(submission):
    """A student's id from the name and login the download gives ("doejane_123"): stable across
    assignments where the login alone is not unique enough to read."""
    login = submission.lms_user_id or submission.login
    if submission.name:
        return SAFE_ID.sub("_", f"{slug(submission.name)}_{login}")
    return SAFE_ID.sub("_", login)


def anonymous_warning(logins, reach, hidden_by, advice):
    """The warning for submissions graded under an LMS's anonymous ids: how many, the first few (as
    `hidden_by` introduces them: "Canvas's anonymous grading: "), what that costs (`reach`), and what
    to do (`advice`)."""
    count = "1 submission is" if len(logins) == 1 else f"{len(logins)} submissions are"
    return (f"{count} anonymous ({hidden_by}{', '.join(logins[:3])}{' ...' if len(logins) > 3 else ''}) and "
            f"graded under the LMS's ids: {reach}. To grade them as the students they are, {advice}")


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
