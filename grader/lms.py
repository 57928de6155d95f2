"""How each LMS names the files of a submissions download: who submitted, which attempt, and
(where the name says it) when.

A preset reads one file's path (relative to the download's top folder) and returns a `Found`, or
None when the name is not one that LMS writes. `--pattern` builds a preset from a regular
expression with named groups, as nbgrader's FileNameCollectorPlugin does:

    canvas      {sortablename}_[LATE_]{userid}_{attachmentid}_{original name}[-N].ext
                [LATE_]anon_{anonymousid}_{attachmentid}_{original name}  (anonymous grading)
                {group name}_[LATE_]{userid}_{attachmentid}_{original name}  (a group assignment:
                one file per group, the name part the group's, the user id one member's)
                (flat; LATE_ when Canvas counted it late; -1, -2 ... when the same name was
                uploaded again; canvas-lms lib/content_zipper.rb, Assignment#representatives)
    moodle      {Full Name}_{participantid}_assignsubmission_file[_]/[{folders}/]{original name}
                Participant_{participantid}_assignsubmission_file[_]/...  (blind marking)
                {Group name}_{groupid}_assignsubmission_file/...  (team submissions; the group's
                name with _ made a space; "Default group_assignsubmission_file" for who is in none)
                (one folder per participant or team, trailing _ before Moodle 4.1, the student's
                own folders kept below it; or the same prefix on flat names; the participant id is
                the assignment's own mapping id, not the user id: mod/assign/classes/downloader.php)
    blackboard  {assignment}_{username}_attempt_{YYYY-MM-DD-HH-MM-SS}[_{original name}].ext
    nbgrader    {student}/{assignment}/{assignment}.ipynb (+ timestamp.txt): the submitted/ folder
                {student}+{assignment}+{timestamp}[+{random}]/{assignment}.ipynb: the exchange inbound
    folder      {student}.ipynb, {student}_{assignment}.ipynb or {student}/[{folders}/]{any}.ipynb (no LMS)
    classroom   {slug}-submissions/{slug}-{github username}/ (a git repository each), as
                `gh classroom clone student-repos` writes it (github/gh-classroom,
                cmd/gh-classroom/clone/student-repos): read by grader/classroom.py, not by a preset
                here, since the notebook and its time come from the repository's commits

A student's .zip (Moodle and Canvas take any file) is opened by collect: the notebooks inside are
read as that student's files (grader/stages/collect.py). Which files of a group are whose comes
from --groups (grader/groups.py).

A download's own file times are never read: Canvas and Moodle stamp every entry of their zip with
the moment they build it. Times come from the names (Blackboard, nbgrader) or from what the LMS
records beside the download (grader/lms_records.py).
"""
import datetime
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

LMS_PRESETS = ("canvas", "moodle", "blackboard", "nbgrader")
LMS_CHOICES = ("auto",) + LMS_PRESETS + ("folder", "classroom")     # what --lms takes
# what `nbgrader collect` stores beside a submission: when it was submitted, and the key nbgrader's
# release_feedback names the student's returned feedback by (kept with the graded notebook)
NBGRADER_KEYS = ("timestamp.txt", "submission_secret.txt")
SAFE_ID = re.compile(r"[^A-Za-z0-9_.@-]+")


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


def local_time(naive_or_aware, zone=None):
    """A datetime as aware UTC; a naive one is read in `zone` (an IANA name such as Europe/Berlin,
    the LMS's zone), else in this machine's time zone (as an instructor types a deadline)."""
    value = naive_or_aware
    if value.tzinfo is None:
        value = value.replace(tzinfo=time_zone(zone)) if zone else value.astimezone()
    return value.astimezone(datetime.timezone.utc)


def time_zone(name):
    """The zone called `name`; ValueError naming the problem for an unknown one."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as Europe/Berlin or "
                         "America/New_York") from error


def parse_time(text, zone=None):
    """'2026-10-01 23:59', '2026-10-01T23:59:00-05:00', nbgrader's '2026-10-01 12:00:00.123 UTC',
    Blackboard's '2026-10-01-23-59-00', Moodle's 'Thursday, 1 October 2026, 11:59 PM' -> aware UTC
    datetime, reading a time without an offset in `zone` (default: this machine's); ValueError with
    the forms it takes."""
    if zone:
        time_zone(zone)                     # an unknown zone is its own error, not a bad time
    text = text.strip()
    blackboard = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)-(\d\d)-(\d\d)-(\d\d)", text)
    if blackboard:
        return local_time(datetime.datetime(*map(int, blackboard.groups())), zone)
    try:
        from dateutil import parser
        return local_time(parser.parse(text), zone)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"cannot read {text!r} as a date and time; expected e.g. '2026-10-01 23:59' "
                         "(this machine's time zone) or '2026-10-01T23:59:00+02:00'") from error


# the name part keeps letters, digits and underscores (Canvas drops the rest and every "_<digits>_")
_CANVAS = re.compile(r"(?:(?P<name>[^/]+?)_)??(?P<late>late_)?(?P<uid>\d+|anon_[A-Za-z0-9]+)_(?P<sid>\d+)_"
                     r"(?P<orig>.+?)(?:-(?P<rev>\d+))?(?P<ext>\.[A-Za-z0-9]+)?", re.IGNORECASE)
_MOODLE = re.compile(r"(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?:file|onlinetext)_?(?P<orig>.*)")
# team submissions of students in no group: mod_assign's string 'defaultteam', with no group id, in
# the downloading user's language (mod/assign/lang/{en,de,fr,es}/assign.php); read as DEFAULT_TEAM
DEFAULT_TEAM = "Default group"
DEFAULT_TEAM_NAMES = (DEFAULT_TEAM, "Standard-Gruppe", "Groupe par défaut", "Grupo por defecto")
_MOODLE_DEFAULT_TEAM = re.compile("(?:" + "|".join(map(re.escape, DEFAULT_TEAM_NAMES))
                                  + r")_assignsubmission_(?:file|onlinetext)_?", re.IGNORECASE)


def default_team(name):
    """DEFAULT_TEAM for Moodle's name of the team of students in no group, in any language read; else
    `name` as it is."""
    return DEFAULT_TEAM if name.strip().lower() in (n.lower() for n in DEFAULT_TEAM_NAMES) else name
_BLACKBOARD = re.compile(r"(?P<assignment>.+)_(?P<user>[^_]+)_attempt_"
                         r"(?P<time>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<orig>.+))?")
_EXCHANGE = re.compile(r"(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<time>[^+]+)(?:\+.*)?")


def canvas(relative, path, assignment_id, zone=None):
    match = _CANVAS.fullmatch(relative.name)
    if len(relative.parts) != 1 or not match:
        return None
    return Found(path, login=match["uid"], name=match["name"] or "", lms_late=bool(match["late"]),
                 revision=int(match["rev"] or 0), preset="canvas")


def moodle(relative, path, assignment_id, zone=None):
    if len(relative.parts) >= 2:        # one folder per participant (or team), the student's own folders below
        match = _MOODLE.fullmatch(relative.parts[0])
        if not match and _MOODLE_DEFAULT_TEAM.fullmatch(relative.parts[0]):
            return Found(path, login=DEFAULT_TEAM, name=DEFAULT_TEAM, preset="moodle",
                         inside="/".join(relative.parts[1:-1]))
    elif len(relative.parts) == 1:      # older Moodles: flat names with the same prefix
        match = _MOODLE.fullmatch(relative.name)
        match = match if match and match["orig"] else None
    else:
        match = None
    if not match:
        return None
    return Found(path, login=match["uid"], name=match["name"], preset="moodle", inside="/".join(relative.parts[1:-1]))


def blackboard(relative, path, assignment_id, zone=None):
    match = _BLACKBOARD.fullmatch(relative.stem) if len(relative.parts) == 1 else None
    if not match:
        return None
    return Found(path, login=match["user"], name=match["user"], submitted_at=parse_time(match["time"], zone),
                 preset="blackboard", receipt=match["orig"] is None and relative.suffix == ".txt")


def nbgrader(relative, path, assignment_id, zone=None):
    parts = relative.parts
    if len(parts) == 3 and parts[1] == assignment_id:                 # submitted/<student>/<aid>/...
        student, stamp_file = parts[0], path.parent / "timestamp.txt"
    elif len(parts) == 2 and _EXCHANGE.fullmatch(parts[0]):           # inbound/<student>+<aid>+<time>/...
        match = _EXCHANGE.fullmatch(parts[0])
        if match["assignment"] != assignment_id:
            return None
        student, stamp_file = match["student"], path.parent / "timestamp.txt"
        if not _plain_file(stamp_file):
            return Found(path, login=student, name=student, submitted_at=_try_time(match["time"]),
                         preset="nbgrader")
    else:
        return None
    when = _try_time(stamp_file.read_text()) if _plain_file(stamp_file) else None
    return Found(path, login=student, name=student, submitted_at=when, preset="nbgrader")


def folder(relative, path, assignment_id, zone=None):
    """No LMS: the student is the file's name (less the assignment id) or the top folder's."""
    parts = relative.parts
    if len(parts) == 1:
        if relative.suffix != ".ipynb":     # a stray README beside the notebooks names nobody
            return None
        stem = relative.stem.replace(assignment_id, "").strip("_- ") or relative.stem
        return Found(path, login=SAFE_ID.sub("_", stem), preset="folder")
    inner = parts[1:] if len(parts) == 2 or parts[1] != assignment_id else parts[2:]
    if len(inner) > 1 and relative.suffix not in (".ipynb", ".zip"):
        return None                     # a student's data files deep in their folder are not attempts
    return Found(path, login=SAFE_ID.sub("_", parts[0]), preset="folder", inside="/".join(inner[:-1]))


def from_pattern(regex):
    """A preset from --pattern: named groups `student` (required) and `timestamp` (optional),
    searched in the file's path relative to the download's top folder."""
    try:
        compiled = re.compile(regex)
    except re.error as error:
        raise ValueError(f"--pattern {regex!r} is not a regular expression: {error}") from error
    if "student" not in compiled.groupindex:
        raise ValueError(f"--pattern {regex!r} needs a named group for the student, e.g. "
                         r"'(?P<student>[^_]+)_(?P<timestamp>[0-9-]+)\.ipynb'")

    def preset(relative, path, assignment_id, zone=None):
        match = compiled.search(relative.as_posix())
        if not match or not match["student"]:
            return None
        when = None
        if "timestamp" in compiled.groupindex and match["timestamp"]:
            when = parse_time(match["timestamp"], zone)
        return Found(path, login=match["student"], name=match["student"], submitted_at=when, preset="pattern")
    return preset


PRESETS = {"canvas": canvas, "moodle": moodle, "blackboard": blackboard, "nbgrader": nbgrader, "folder": folder}


def _plain_file(path):
    """A file that is no link (a link is never read: grader/safe_files.py)."""
    return path.is_file() and not path.is_symlink()


def _try_time(text):
    try:
        return parse_time(text)
    except ValueError:
        return None


def read_names(files, assignment_id, lms="auto", pattern=None, zone=None):
    """(preset name, [Found], [unrecognised relative paths]) for `files`, a list of
    (relative PurePosixPath, Path). `auto` takes the preset that reads the most files (an LMS preset
    before `folder` on a tie). `zone`: the LMS's time zone, for times in names without an offset."""
    if pattern:
        preset, name = from_pattern(pattern), "pattern"
    elif lms == "auto":
        name = max(LMS_PRESETS + ("folder",), key=lambda n: (
            sum(PRESETS[n](rel, path, assignment_id, zone) is not None for rel, path in files),
            n != "folder"))
        preset = PRESETS[name]
    elif lms in PRESETS:
        preset, name = PRESETS[lms], lms
    else:
        raise ValueError(f"unknown --lms {lms!r}; choose one of {', '.join(LMS_CHOICES)}")
    found, unrecognised = [], []
    for relative, path in files:
        item = preset(relative, path, assignment_id, zone)
        if item is None:
            unrecognised.append(relative)
        elif not item.receipt:
            item.relative = relative
            found.append(item)
    return name, found, unrecognised


def relative_files(top):
    """Every file under `top` a student could have submitted, as (relative path, path); hidden
    files, macOS resource forks, nbgrader's timestamp and secret files and checkpoints are left out.
    Links (to a file or a folder, or to nothing) are listed too, never followed, so that whoever
    sent one is told it was not read (grader/safe_files.py)."""
    result = []
    for path in sorted(Path(top).rglob("*")):
        relative = PurePosixPath(path.relative_to(top).as_posix())
        if not (path.is_file() or path.is_symlink()) or any(p.startswith(".") or p == "__MACOSX"
                                                             for p in relative.parts):
            continue
        if path.name in NBGRADER_KEYS or ".ipynb_checkpoints" in relative.parts:
            continue
        result.append((relative, path))
    return result
