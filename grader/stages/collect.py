"""collect: find one notebook per student in whatever the instructor was given, and when it came.

The source is a folder or a .zip as an LMS gives it (Canvas, Moodle, Blackboard), nbgrader's
submitted/ folder or exchange inbound, or a plain folder of notebooks; grader/lms/ reads who
submitted each file. When one student sent several files, the latest notebook is graded and the
others are listed; files no naming reads are listed as unrecognised, never dropped. The time of a
submission comes from its name (Blackboard, nbgrader) or from what the LMS records beside the
download (--times, --worksheet: grader/lms/records.py), never from the download's file times; a
submission with none is "time unknown", never late by a guess. A notebook in a subfolder of the
student's upload, or in a .zip they uploaded, is found and graded with a note saying where it was.
GitHub Classroom's student repositories are read by grader/classroom.py (the notebook as of a
commit). Mapping the LMS's identity to the class list, and a group's file to its members, is the
next stage (identify)."""
import dataclasses
import re
import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from .. import classroom
from ..lms import SAFE_ID, default_team, format_of, read_names, relative_files
from ..lms.records import LmsRecord, read_text, read_times, read_worksheet
from ..safe_files import link_reason
from ..submission import Status, Submission


def collect(intake, batch):
    """Fill `intake` with one Submission per student found at `intake.source` (and the files no
    naming reads); a zip is unpacked into the batch's scratch folder."""
    options = batch.options
    if intake.source.suffix == ".ipynb" and intake.source.is_file():
        return _one_notebook(intake, options)
    if options.lms == "classroom" or (options.lms == "auto" and not options.pattern
                                      and classroom.looks_like_classroom(intake.source)):
        intake.preset = "classroom"
        intake.submissions, unrecognised = classroom.read_repositories(
            intake.source, batch.assignment_id, batch.scratch, due=classroom.due_date(batch))
        intake.unrecognised = [Submission(path, status=Status.UNRECOGNISED, reason=why) for path, why in unrecognised]
        return intake
    preset, intake.submissions, unrecognised = read_download(intake.source, batch.assignment_id, batch.scratch,
                                                             lms=options.lms, pattern=options.pattern,
                                                             zone=options.lms_timezone)
    intake.preset = preset
    if options.times:
        _apply_times(intake, times_files(options.times), options.lms_timezone)
    if options.worksheet:
        intake.worksheet = read_worksheet(options.worksheet, options.lms_timezone)
        unmatched = apply_records(intake.submissions, intake.worksheet, worksheet=True)
        intake.warnings += _partial(unmatched, intake.submissions, f"the worksheet ({Path(options.worksheet).name}) "
                                    "has no row for", "is it this assignment's worksheet, downloaded after the last "
                                    "submission?")
    intake.unrecognised = [Submission(path, status=Status.UNRECOGNISED,
                                      reason=why or f"not read as a {preset} file name (use --lms or --pattern)")
                           for path, why in unrecognised]
    return intake


def _one_notebook(intake, options):
    """SOURCE is one student's notebook (a replacement file): --student says whose, --submitted-at
    when it came (else its time is unknown)."""
    if not options.student:
        raise ValueError(f"{intake.source} is a single notebook: say whose it is with --student ID "
                         "(and when it came with --submitted-at)")
    intake.preset = "file"
    intake.submissions = [Submission(SAFE_ID.sub("_", options.student), intake.source, login=options.student,
                                     submitted_at=options.submitted_at, preset="file",
                                     lms_name=intake.source.name)]
    return intake


def read_download(source, assignment_id, workspace, lms="auto", pattern=None, zone=None):
    """(the preset that read the names, [Submission], [(relative path of an unrecognised file, why
    or None)]). A file that is a link, or lies in a linked folder, is never read: its student's row
    says so (grader/safe_files.py); so does one the download's zip held too large to unpack."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"no such file or folder: {source}")
    refused = {}                                  # relative path -> why it is not read
    if source.is_file():
        source, too_large = _unzip(source, Path(tempfile.mkdtemp(prefix="download-", dir=workspace)))
        refused.update(too_large)
    files = relative_files(source)
    files += sorted((PurePosixPath(name), source / name) for name in refused
                    if not any(p.startswith(".") or p == "__MACOSX" for p in PurePosixPath(name).parts))
    for relative, path in files:
        why = refused.get(str(relative)) or link_reason(path, source, shown=str(relative))
        if why:
            refused[str(relative)] = why
    preset, found, unrecognised = read_names(files, assignment_id, lms=lms, pattern=pattern, zone=zone)
    for item in found:
        item.problem = refused.get(str(item.relative), "")
    found = [opened for item in found for opened in _open_student_zip(item, workspace)]
    by_login = {}
    for item in found:
        by_login.setdefault(item.login, []).append(item)
    submissions = [_latest(assignment_id, attempts) for attempts in by_login.values()]
    if preset in ("nbgrader", "folder"):    # a student's folder with nothing in it
        for entry in sorted(source.iterdir()):
            login = SAFE_ID.sub("_", entry.name.split("+")[0])
            if entry.is_dir() and not entry.is_symlink() and not entry.name.startswith((".", "__MACOSX")) \
                    and login not in by_login \
                    and not any(p.is_file() for p in entry.rglob("*")):
                submissions.append(Submission(login, None, reason=f"no {assignment_id}.ipynb in the submission",
                                              login=login, preset=preset))
    unrecognised = [(str(r), refused.get(str(r))) for r in unrecognised
                    if not (preset == "nbgrader" and r.name == "timestamp.txt")]
    return preset, sorted(submissions, key=lambda s: s.login), unrecognised


def times_files(times):
    """--times as a list of files: one, or several (each page of Canvas's paginated API its own file)."""
    return [times] if isinstance(times, (str, Path)) else list(times)


# Canvas's page sizes: 10 unless per_page says more, and per_page is capped (100 on most instances)
_CANVAS_PAGE_SIZES = (10, 50, 100)


def _apply_times(intake, files, zone):
    records, full_pages = {}, []
    for path in files:
        page = read_times(path, zone)
        records.update(page)
        users = len({record.key for record in page.values()})
        if _is_json(path) and users in _CANVAS_PAGE_SIZES:
            full_pages.append(f"{Path(path).name} holds {users}, a whole page of Canvas's API")
    unmatched = apply_records(intake.submissions, records)
    names = ", ".join(Path(path).name for path in files)
    hint = ("Canvas's submissions API answers one page at a time: save every page (&page=2, &page=3, ... until "
            "one is []) and give each with its own --times" + (f" ({'; '.join(full_pages)})" if full_pages else "")
            if any(_is_json(path) for path in files) else "add their rows")
    intake.warnings += _partial(unmatched, intake.submissions, f"the times ({names}) hold no record of", hint)


def _is_json(path):
    return read_text(path).lstrip().startswith(("[", "{"))


def _partial(unmatched, submissions, says, hint):
    """The warning for records that cover part of the download: how many, who, what to do."""
    if not unmatched:
        return []
    shown = ", ".join(f"{s.name} ({s.login})" if s.name and s.name != s.login else s.login for s in unmatched[:8])
    more = f" and {len(unmatched) - 8} more" if len(unmatched) > 8 else ""
    return [f"{says} {len(unmatched)} of the {len(submissions)} submissions in the download ({shown}{more}): "
            f"their time is unknown, so they are never late (nor penalised); {hint}"]


def apply_records(submissions, records, worksheet=False):
    """What the LMS records for each submission, matched by the key the download names them by:
    the time (and the LMS's late verdict) wherever the records hold one, the name and e-mail they
    give, the user behind an anonymous name (Canvas's admin JSON), the extension (Moodle's
    `worksheet`, which says there is none when it has none); a Moodle team's folder gets its team's
    time from its members' rows, never from a participant's row that happens to have the group's
    number. A submission the records do not know keeps what its name said; those are returned."""
    teams = worksheet and any(record.group for record in records.values())
    unmatched = []
    for submission in submissions:
        lms_format = format_of(submission.preset)
        team = teams and lms_format.team_folders
        record = _team_row(submission, records) if team else records.get(submission.login)
        if record is None:
            unmatched.append(submission)
            continue
        submission.submitted_at = record.submitted_at or submission.submitted_at
        if record.late is not None:
            submission.lms_late = record.late
        anonymous = lms_format.anonymous_prefix and submission.login.startswith(lms_format.anonymous_prefix)
        if anonymous and record.key != submission.login:
            submission.lms_user_id = record.key          # anonymous_id paired with its user_id
        submission.name = submission.name or record.name
        if record.name and submission.name.lower() == "participant":     # Moodle's blind marking
            submission.name = record.name
        submission.email = record.email or submission.email
        if worksheet and not team:                       # the student's own row, not a team's
            submission.lms_records_read, submission.lms_extension = True, record.extension
    return unmatched


def _team_row(submission, records):
    """A Moodle team's folder is named by the group, its number the group's id, which no row of the
    worksheet has: every member's row holds the team's submission time and names the team in its
    Group column (the default team's name in the worksheet's language)."""
    team = _slug(default_team(submission.name))
    rows = [r for r in records.values() if r.group and _slug(default_team(r.group)) == team]
    if not team or not rows:
        return None
    times = [r.submitted_at for r in rows if r.submitted_at]
    return LmsRecord(submission.login, max(times) if times else None, late=True if any(r.late for r in rows) else None)


def _slug(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _latest(assignment_id, attempts):
    """The latest notebook among one student's files that can be read, the others listed (a file not
    read says why: a link, a file too large to unpack)."""
    attempts = sorted(attempts, key=lambda f: f.attempt_key, reverse=True)
    readable = [f for f in attempts if not f.problem]
    chosen = (readable or attempts)[0]
    rest = [f for f in attempts if f is not chosen]
    expected = f"{assignment_id}.ipynb"
    submission = Submission(SAFE_ID.sub("_", chosen.login), chosen.path, login=chosen.login, name=chosen.name,
                            submitted_at=chosen.submitted_at, lms_late=chosen.lms_late,
                            others=[f.path.name for f in rest], preset=chosen.preset)
    notebooks = [f for f in readable if f.path.suffix == ".ipynb"]
    problems = [f.problem for f in attempts if f.problem]
    if not notebooks:
        names = ", ".join(f.path.name for f in attempts)
        refused = [f.problem for f in attempts if f.problem and f.path.suffix == ".ipynb"]
        submission.path = None
        submission.reason = "; ".join(refused) if refused else f"no notebook in the submission (found {names})" + (
            "; " + "; ".join(problems) if problems else "")
        return submission
    for problem in problems:
        submission.note(f"not read: {problem}")
    # files of one folder with nothing to order them by: the expected name (nearest the top of the
    # upload), else the one notebook nearest the top, else no guess; two copies of one name (the
    # file picker's or the browser's "name (1).ipynb") are never told apart by their names
    tied = [f for f in notebooks if f.attempt_key[1:3] == notebooks[0].attempt_key[1:3]]
    why_this = ""
    if len(tied) > 1:
        named = sorted((f for f in tied if f.path.name == expected), key=_depth)
        top = [f for f in tied if _depth(f) == min(map(_depth, tied))]
        if not named and len(top) > 1:
            submission.path = None
            submission.reason = (f"no {expected}, and several other notebooks "
                                 f"({', '.join(sorted(map(_shown_path, tied)))}): rename the one to grade {expected}")
            return submission
        chosen = named[0] if named else top[0]
        copies = [f for f in tied if f is not chosen and _copy_of(f) == _copy_of(chosen)]
        if any(f.path.read_bytes() != chosen.path.read_bytes() for f in copies):
            submission.path = None
            versions = ", ".join(sorted(map(_shown_path, [chosen] + copies)))
            submission.reason = (f"two versions of {_copy_of(chosen)[1]} in one submission ({versions}) and nothing "
                                 "records which came last (the LMS keeps one time for the whole submission): grade "
                                 "the right one with `autograde ID FILE.ipynb --student ID --submitted-at TIME`, "
                                 "or ask the student")
            return submission
        submission.path = chosen.path
        submission.others = [_shown_path(f) for f in attempts if f is not chosen]
        why_this = ("identical copies" if copies else "the assignment's name" if named else
                    "the notebook at the top of the upload") + "; nothing records which file came last"
    submission.lms_name = chosen.relative.parts[0]
    if chosen.inside:
        submission.note(f"notebook found in {chosen.inside}/: {chosen.path.name}")
    if chosen.preset in ("nbgrader", "folder") and len(chosen.relative.parts) > 1 and chosen.path.name != expected:
        submission.note(f"notebook was renamed to {chosen.path.name}; graded as {expected}")
    if submission.others:
        later = "" if not chosen.submitted_at else f" ({_shown_time(chosen.submitted_at)})"
        which = (f"graded {chosen.path.name} ({why_this})" if why_this else
                 f"graded the latest file, {chosen.path.name}{later}" if len(notebooks) > 1 else
                 f"graded the notebook, {chosen.path.name}")
        submission.note(f"{which}; not graded: " + ", ".join(submission.others))
    return submission


# "name (1).ipynb": a copy of "name.ipynb" made by Moodle's file picker when an upload's name is taken
# (lib/filestorage/file_storage.php, get_unused_filename: file.txt > file (1).txt > file (2).txt), or by
# a browser saving a download twice
_COPY = re.compile(r"(?P<stem>.+?) \((?P<n>\d+)\)(?P<ext>\.[^.]+)?")


def _copy_of(found):
    """(the folder in the upload, the name it is a copy of) for "name (N).ext", else its own name."""
    match = _COPY.fullmatch(found.path.name)
    name = f"{match['stem']}{match['ext'] or ''}" if match else found.path.name
    return found.inside, name


def _depth(found):
    return len(PurePosixPath(found.inside).parts) if found.inside else 0


def _shown_path(found):
    return f"{found.inside}/{found.path.name}" if found.inside else found.path.name


# a student's own zip: what is read of it (notebooks only, each and all bounded)
STUDENT_ZIP_MAX_BYTES = 64 * 2**20          # the notebooks of one zip, unpacked
STUDENT_ZIP_MAX_NOTEBOOKS = 20
# entries of any kind: its central directory is read whole before any other bound can be checked
STUDENT_ZIP_MAX_ENTRIES = 2000


def _open_student_zip(found, workspace):
    """A student's uploaded .zip -> a Found per notebook inside (unpacked into the batch's scratch
    space: notebooks only, no path outside the target, bounded in size and count); a zip that cannot
    be read, or holds none, stays as it is (no notebook) and says why. Anything else is returned as is."""
    if found.path.suffix.lower() != ".zip" or found.receipt or found.problem:
        return [found]
    why = None
    try:
        entries = declared_entries(found.path)
        if entries is not None and entries > STUDENT_ZIP_MAX_ENTRIES:
            raise zipfile.BadZipFile(f"it holds {entries} entries, more than the {STUDENT_ZIP_MAX_ENTRIES} "
                                     "a student's zip may")
        with zipfile.ZipFile(found.path) as archive:
            names = [m.filename.replace("\\", "/") for m in archive.infolist()]
            unsafe = [name for name in names if name.startswith("/") or ".." in PurePosixPath(name).parts]
            members = [m for m in archive.infolist() if not m.is_dir() and m.filename.endswith(".ipynb")
                       and not any(p.startswith(".") or p == "__MACOSX" for p in PurePosixPath(m.filename).parts)]
            if unsafe:
                why = f"unsafe path in {found.path.name}: {unsafe[0]}"
            elif len(members) > STUDENT_ZIP_MAX_NOTEBOOKS or \
                    sum(m.file_size for m in members) > STUDENT_ZIP_MAX_BYTES:
                why = (f"{found.path.name} holds more notebooks than a submission does "
                       f"({len(members)} notebooks, {sum(m.file_size for m in members) / 2**20:.0f} MiB)")
            elif not members:
                why = f"{found.path.name} holds no notebook"
            else:
                target = Path(tempfile.mkdtemp(prefix="student-zip-", dir=workspace))
                opened = []
                for member in members:
                    inner = PurePosixPath(member.filename)
                    path = target.joinpath(*inner.parts)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with archive.open(member) as source:      # never more than the size it declares
                        path.write_bytes(source.read(STUDENT_ZIP_MAX_BYTES + 1))
                    inside = "/".join(filter(None, (found.inside, found.path.name, *inner.parts[:-1])))
                    opened.append(dataclasses.replace(found, path=path, inside=inside))
                return opened
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as error:
        why = f"{found.path.name} cannot be opened as a zip ({error})"
    found.problem = why
    return [found]


def _shown_time(when):
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


# The LMS's download, unpacked into the run's scratch space. What a student controls in it is the
# content of their own files (the LMS compresses them: a 1 GiB file of zeros is a 1 MB entry), so
# each bound is checked against what the zip declares before anything is written, and against the
# bytes actually written while they are.
# A file of the download larger than this is not unpacked, and its student is "not graded" with the
# reason; everyone else is graded. No notebook comes near it: a graded kernel may write no file over
# 256 MiB (the sandbox's limit), and a notebook read whole takes several times its size in memory.
DOWNLOAD_MAX_ENTRY_BYTES = 256 * 2**20
# The whole download, unpacked: a class of a thousand students at a few MiB each is well under it,
# and it keeps a download of many large files from filling the grading machine's disk. Above it
# nothing is unpacked and nothing graded: unzip a genuine download of that size yourself and grade
# the folder.
DOWNLOAD_MAX_BYTES = 4 * 2**30
# Entries of any kind, counted from the zip's end record before its central directory is read
# (Python holds every entry's record in memory): a thousand students with several files each fit.
DOWNLOAD_MAX_ENTRIES = 20_000
_CHUNK = 2**20


def declared_entries(path):
    """How many entries a zip says it holds, from its end record, before anything else is read
    (None when there is no end record: zipfile then says why it cannot be opened)."""
    with open(path, "rb") as handle:
        end = zipfile._EndRecData(handle)      # the stdlib's reader of the end record (zip64 too)
    return None if not end else end[zipfile._ECD_ENTRIES_TOTAL]


def _unzip(archive_path, target):
    """Unpack the LMS's download into `target` within DOWNLOAD_MAX_* (no link is ever made: only
    files and folders). Returns (the folder holding the submissions, {path below it: why it was not
    unpacked}) for the files too large to unpack; raises ValueError, with nothing left in `target`,
    when the whole download is refused."""
    name = Path(archive_path).name
    if not zipfile.is_zipfile(archive_path):
        raise ValueError(f"{archive_path} is neither a folder nor a zip archive")
    entries = declared_entries(archive_path)
    if entries is not None and entries > DOWNLOAD_MAX_ENTRIES:
        raise ValueError(f"{name} holds {entries} entries, more than the {DOWNLOAD_MAX_ENTRIES} a download may "
                         "hold: nothing was unpacked or graded (unzip it yourself and grade the folder if it is "
                         "a genuine download)")
    with zipfile.ZipFile(archive_path) as archive:
        members = archive.infolist()
        for member in members:   # never write outside the target (zip slip)
            if member.filename.startswith("/") or ".." in Path(member.filename).parts:
                raise ValueError(f"unsafe path in zip: {member.filename}")
        too_large = {m.filename: (f"{m.filename} unpacks to {_size(m.file_size)}, more than the "
                                  f"{_size(DOWNLOAD_MAX_ENTRY_BYTES)} a file of the download may be, so it was "
                                  "not unpacked")
                     for m in members if m.file_size > DOWNLOAD_MAX_ENTRY_BYTES}
        kept = [m for m in members if m.filename not in too_large]
        total = sum(m.file_size for m in kept)
        if total > DOWNLOAD_MAX_BYTES:
            largest = ", ".join(f"{m.filename} ({_size(m.file_size)})"
                                for m in sorted(kept, key=lambda m: -m.file_size)[:3])
            raise ValueError(f"{name} unpacks to {_size(total)}, more than the {_size(DOWNLOAD_MAX_BYTES)} a "
                             "download may: nothing was unpacked or graded "
                             f"(largest: {largest}; unzip it yourself and grade the folder if it is a genuine "
                             "download)")
        member = None
        try:
            written = 0
            for member in members:
                written += _unpack(archive, member, target, written, skip=member.filename in too_large)
        except (ValueError, OSError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile,
                zlib.error) as error:
            shutil.rmtree(target, ignore_errors=True)      # nothing half-unpacked is graded
            where = f" at {member.filename}" if member is not None else ""
            raise ValueError(f"{name} cannot be unpacked{where} ({error}): nothing was graded") from None
    # a file left out at the top keeps the top where it is (its wrapper folder would leave it outside)
    at_top = any(len(PurePosixPath(entry).parts) == 1 for entry in too_large)
    top = target if at_top else _single_top_folder(target)
    refused = {PurePosixPath(target.joinpath(*PurePosixPath(entry).parts).relative_to(top).as_posix()).as_posix(): why
               for entry, why in too_large.items()}
    return top, refused


def _unpack(archive, member, target, written, skip=False):
    """Write one entry below `target` (its folders only, when `skip`); returns the bytes written.
    The bytes are counted as they come: an entry that unpacks to more than it declares, or past the
    download's budget, stops the whole unpacking."""
    parts = [p for p in PurePosixPath(member.filename).parts if p not in ("", ".")]
    if not parts:
        return 0
    path = target.joinpath(*parts)
    if member.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    if skip:
        return 0
    count = 0
    with archive.open(member) as source, open(path, "wb") as sink:
        while chunk := source.read(_CHUNK):
            count += len(chunk)
            if count > member.file_size:
                raise ValueError(f"it unpacks to more than the {member.file_size} bytes it declares")
            if written + count > DOWNLOAD_MAX_BYTES:
                raise ValueError(f"the download unpacks to more than {_size(DOWNLOAD_MAX_BYTES)}")
            sink.write(chunk)
    return count


def _size(count):
    """Bytes in words: '300 MiB', '4.0 GiB'."""
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


def _single_top_folder(folder):
    """The folder inside a zip that holds the submissions: a lone wrapper folder (Canvas's
    "submissions/", nbgrader's "submitted/") is stepped into, a lone Moodle participant's or
    exchange folder is not."""
    entries = [e for e in folder.iterdir() if not e.name.startswith((".", "__MACOSX"))]
    if len(entries) != 1 or not entries[0].is_dir():
        return folder
    inner = entries[0]
    if "_assignsubmission_" in inner.name or "+" in inner.name or (inner / "submitted").exists():
        return folder
    return inner
