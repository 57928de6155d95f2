"""The LMS formats the grader reads and writes, one module each, listed once in FORMATS below: how
each names the files of a submissions download (who submitted, which attempt, and where the name
says it, when), how people are named in messages, and the name each student's page takes in its
feedback zip. A new LMS is one module here with a FORMAT (grader/lms/base.py: LmsFormat) and one
test module; docs/architecture.md shows one.

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
records beside the download (grader/lms/records.py).
"""
import re
from pathlib import Path, PurePosixPath

from ..times import local_time, parse_time, time_zone  # noqa: F401 - read through grader.lms too
from . import blackboard, canvas, classroom, folder, moodle, nbgrader
from .base import NBGRADER_KEYS, SAFE_ID, CsvForm, Found, GradesExport, LmsFormat, plain_file  # noqa: F401
from .moodle import DEFAULT_TEAM, DEFAULT_TEAM_NAMES, default_team  # noqa: F401

# every LMS format, in the order `--lms auto` prefers on a tie (folder, no LMS, last)
FORMATS = {f.name: f for f in (canvas.FORMAT, moodle.FORMAT, blackboard.FORMAT, nbgrader.FORMAT, folder.FORMAT,
                                classroom.FORMAT)}


def register(lms_format):
    """Add a format (an LMS module's FORMAT) to FORMATS; returns it. The course's own formats are
    listed above; a test or a course's extension may add one."""
    FORMATS[lms_format.name] = lms_format
    return lms_format


def choices():
    """What --lms takes: auto, then every format."""
    return ("auto", *FORMATS)


def feedback_zip_formats():
    """The formats `feedback --zip` can pack for."""
    return tuple(name for name, f in FORMATS.items() if f.feedback_name is not None)


def export_formats():
    """The LMS gradebook imports `export --format` writes."""
    return tuple(name for name, f in FORMATS.items() if f.export is not None)


def format_of(preset):
    """The format that read a submission (its `preset`); for --pattern, a single notebook or an
    unknown name, a format that does none of an LMS's own things."""
    return FORMATS.get(preset) or LmsFormat(preset or "")


def user_word(preset):
    """How the LMS that `preset` names calls a person ("Canvas user"), else "login"."""
    return format_of(preset).user


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


def read_names(files, assignment_id, lms="auto", pattern=None, zone=None):
    """(preset name, [Found], [unrecognised relative paths]) for `files`, a list of
    (relative PurePosixPath, Path). `auto` takes the preset that reads the most files (an LMS preset
    before `folder` on a tie). `zone`: the LMS's time zone, for times in names without an offset."""
    if pattern:
        preset, name = from_pattern(pattern), "pattern"
    elif lms == "auto":
        readers = [f for f in FORMATS.values() if f.auto and f.read_name is not None]
        name = max(readers, key=lambda f: (
            sum(f.read_name(rel, path, assignment_id, zone) is not None for rel, path in files),
            f.name != "folder")).name
        preset = FORMATS[name].read_name
    elif lms in FORMATS and FORMATS[lms].read_name is not None:
        preset, name = FORMATS[lms].read_name, lms
    else:
        raise ValueError(f"unknown --lms {lms!r}; choose one of {', '.join(choices())}")
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
