"""The course's saved state, and the one module that knows where it lives and how it is read and
written. Everything else asks here; nothing else joins a path inside the grading folder.

    <grading folder>/                   (course/ by default; Course.grading_dir)
      gradebook.db                      nbgrader's gradebook, or $GRADER_DB_URL (Course.db_url):
                                        students, grades, each assignment and its due date
      submitted/ autograded/ feedback/  nbgrader's folders: autograded/<student>/<id>/<id>.ipynb,
                                        feedback/<student>/<id>/<id>.html
      exchange/                         nbgrader's exchange (or $GRADER_EXCHANGE_ROOT)
      outcomes/<id>.json                each student's latest outcome (status, reason, failed tests,
                                        lateness): the gradebook has scores, not reasons
      reports/<id>.html                 the class report; similarity/ the similarity reports
      term.json                         the term's decisions the gradebook has no column for (grader/term.py)
      roster.json                       which of the gradebook's students the roster holds (grader/roster.py)
      <id>-feedback-<lms>.zip, <id>-autograder.zip, grades-<format>.csv   what the commands write by default

The gradebook is opened here too, with the one change the course makes to nbgrader: nbgrader stamps
every new gradebook with its schema's alembic revision, which it finds by running the `alembic`
program (`nbgrader.api.get_alembic_version`): about 2.8 CPU-s each time (twice per graded batch),
and a failure when the environment's bin folder is not on PATH. alembic's Python API gives the same
answer from the same scripts; it is asked once per process. A SQLite gradebook's engine (and so its
compiled SQL) is made once per process, and the checks nbgrader makes at every opening once per file
(`_kept_engine`, `gradebook`). And a gradebook that is thrown away after the run (a batch's scratch
copies, the demo's) is written without disk syncs (`throwaway_gradebooks`); the course gradebook never is.
"""
import datetime
import functools
import json
import os
import shutil
import threading
import warnings
from pathlib import Path

from .status import Status

TERM_FILE = "term.json"
ROSTER_FILE = "roster.json"
TERM_SECTIONS = ("penalties", "extensions", "lms_extensions", "excused")


# ---- the grading folder's layout (`course`: a Course, or its grading folder itself) ----

def grading_dir(course):
    return Path(getattr(course, "grading_dir", course))


def submitted_dir(course):
    return grading_dir(course) / "submitted"


def autograded_dir(course):
    return grading_dir(course) / "autograded"


def feedback_dir(course):
    return grading_dir(course) / "feedback"


def exchange_dir(course):
    return grading_dir(course) / "exchange"


def autograded_notebook(course, student, assignment_id):
    """The student's graded notebook, as the merge stage keeps it."""
    return autograded_dir(course) / student / assignment_id / f"{assignment_id}.ipynb"


def feedback_page(course, student, assignment_id):
    return feedback_dir(course) / student / assignment_id / f"{assignment_id}.html"


def feedback_pages(course, assignment_id):
    """Every student's feedback page of the assignment, sorted."""
    return sorted(feedback_dir(course).glob(f"*/{assignment_id}/*.html"))


def report_page(course, assignment_id):
    return grading_dir(course) / "reports" / f"{assignment_id}.html"


def similarity_dir(course):
    return grading_dir(course) / "similarity"


def feedback_zip(course, assignment_id, lms):
    return grading_dir(course) / f"{assignment_id}-feedback-{lms}.zip"


def grades_csv(course, form):
    return grading_dir(course) / f"grades-{form}.csv"


def autograder_zip(course, assignment_id):
    return grading_dir(course) / f"{assignment_id}-autograder.zip"


def sqlite_url(folder):
    """The URL of the SQLite gradebook in `folder` (a course's grading folder, a scratch folder)."""
    return f"sqlite:///{Path(folder) / 'gradebook.db'}"


# ---- the gradebook ----

_LOCK = threading.Lock()


def patch_nbgrader():
    """Patch nbgrader's alembic look-up and quiet its one harmless warning (idempotent;
    Course.nbgrader_config and every gradebook opening call it)."""
    import nbgrader.api
    with _LOCK:
        if getattr(nbgrader.api.get_alembic_version, "in_process", False):
            return
        alembic_head.in_process = True
        nbgrader.api.get_alembic_version = alembic_head
        # nbgrader's update_or_create_submission trips SQLAlchemy's autoflush warning ("... not in
        # session ..."); it is harmless. One targeted filter, set with the first gradebook opened:
        # catch_warnings() around each opening is not thread-safe under parallel grading.
        warnings.filterwarnings("ignore", message=".*not in session.*")
        from sqlalchemy import event
        from sqlalchemy.engine import Engine
        event.listen(Engine, "connect", _no_sync_if_throwaway)
        nbgrader.api.create_engine = _kept_engine


# ---- a SQLite gradebook's engine, made once per process ----

# nbgrader's Gradebook makes a new SQLAlchemy engine each time it is opened and disposes of it at close().
# The engine holds the cache of compiled SQL, so every opening compiled each of its queries again: most of
# the CPU of recording a graded submission (merge and late open the course gradebook for every student).
# The engines of the last few SQLite files opened are kept and handed out again. They pool no connection
# (NullPool): each transaction connects to the file as it is then, so a gradebook replaced or deleted
# meanwhile is read afresh, nothing open is carried into a forked process, and concurrent openings are
# as independent as before. close() still disposes of the engine, which only drops its (empty) pool. Other
# databases (PostgreSQL, in memory) get a new engine each time, as before.
_ENGINES = {}       # (URL, options) -> engine, the latest used last
_ENGINES_KEPT = 8   # the course gradebook, and the temporary gradebooks that grading threads open


def _kept_engine(url, **options):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:") or "poolclass" in options:
        return create_engine(url, **options)
    key = (str(url), tuple(sorted(options.items())))
    with _LOCK:
        engine = _ENGINES.pop(key, None) or create_engine(url, poolclass=NullPool, **options)
        _ENGINES[key] = engine
        for stale in list(_ENGINES)[:-_ENGINES_KEPT]:
            del _ENGINES[stale]
    return engine


# ---- throw-away gradebooks: written without waiting for the disk ----

_THROWAWAY = frozenset()    # folders (resolved) whose SQLite gradebooks are deleted with them (replaced, never changed)


def throwaway_gradebooks(folder):
    """The SQLite gradebooks under `folder` are thrown away with it (a batch's scratch folder, the
    demo's folder): their connections skip the disk syncs (PRAGMA synchronous=OFF), which otherwise
    cost a few ms on each of the dozens of commits a release and a grading make. Only a crash of the
    whole machine can leave such a file torn, and then it is thrown away anyway. Never the course
    gradebook. `keep_gradebooks(folder)` undoes it."""
    global _THROWAWAY
    with _LOCK:
        _THROWAWAY = _THROWAWAY | {Path(folder).resolve()}


def keep_gradebooks(folder):
    global _THROWAWAY
    with _LOCK:
        _THROWAWAY = _THROWAWAY - {Path(folder).resolve()}


def _no_sync_if_throwaway(dbapi_connection, _record):
    """SQLAlchemy's connect event, for every engine (nbgrader makes its own): a SQLite database
    file under a throw-away folder gets synchronous=OFF; every other database keeps its settings."""
    import sqlite3
    folders = _THROWAWAY
    if not folders or not isinstance(dbapi_connection, sqlite3.Connection):
        return
    main = next((row[2] for row in dbapi_connection.execute("PRAGMA database_list") if row[1] == "main"), "")
    if main and any(Path(main).resolve().is_relative_to(folder) for folder in folders):
        dbapi_connection.execute("PRAGMA synchronous=OFF")


@functools.cache
def alembic_head():
    """The revision `alembic heads` prints for nbgrader's migration scripts."""
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini
    with _temp_alembic_ini("sqlite:///gradebook.db") as alembic_ini:
        return ScriptDirectory.from_config(AlembicConfig(alembic_ini)).get_current_head()


def gradebook(db_url):
    """nbgrader's Gradebook on `db_url`, with the patch applied (a new SQLite gradebook is created
    without the alembic program). Use it as `with store.gradebook(url) as gb:`."""
    patch_nbgrader()
    return _checked_once()(db_url)


@functools.cache
def _checked_once():
    """nbgrader's Gradebook, less the checks its opening makes again at every opening (the tables are there,
    the course row is there: three queries and a dozen table look-ups, most of the cost of opening) on a
    SQLite file this process has checked before under the same course id, when it still holds that course
    row. The file is known by its device and inode, so a gradebook deleted or replaced since is checked as
    nbgrader checks it (and a new file that happens to get the old one's inode still needs the course row)."""
    from nbgrader.api import Gradebook
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.orm import scoped_session, sessionmaker

    class CheckedOnce(Gradebook):
        def __init__(self, db_url, course_id="default_course", authenticator=None):
            known = _sqlite_identity(db_url, course_id)
            if known is not None and known in _CHECKED:
                engine = _kept_engine(db_url, echo=False, future=True)
                try:
                    with engine.connect() as connection:
                        present = connection.execute(text("SELECT 1 FROM course WHERE id = :id"),
                                                     {"id": course_id}).first() is not None
                except SQLAlchemyError:
                    present = False
                if present:     # what Gradebook.__init__ sets, its checks left out
                    self.engine = engine
                    self.db = scoped_session(sessionmaker(autoflush=True, bind=engine, future=True))
                    self.course_id = course_id
                    self.authenticator = authenticator
                    return
            super().__init__(db_url, course_id, authenticator)
            checked = _sqlite_identity(db_url, course_id)     # the file may be new
            if checked is not None:
                with _LOCK:
                    _CHECKED.add(checked)
    return CheckedOnce


_CHECKED = set()    # (URL, course id, device, inode) of the SQLite gradebooks checked in this process


def _sqlite_identity(db_url, course_id):
    """(URL, course id, device, inode) of an existing SQLite gradebook file, else None."""
    if not db_url.startswith("sqlite:///"):
        return None
    try:
        found = os.stat(db_url.removeprefix("sqlite:///"))
    except OSError:
        return None
    return (db_url, course_id, found.st_dev, found.st_ino) if found.st_size else None


def copy_gradebook(model, path):
    """A copy of the SQLite gradebook file `model` at `path` (replacing any); opened later in this process,
    it skips the checks `model` passed (a copy has its tables and course row)."""
    shutil.copyfile(model, path)
    model_url, copy_url = f"sqlite:///{model}", f"sqlite:///{path}"
    with _LOCK:
        passed = {course for url, course, *_ in _CHECKED if url == model_url}
        for course in passed:
            if _sqlite_identity(model_url, course) in _CHECKED:
                _CHECKED.add(_sqlite_identity(copy_url, course))


def submitted_notebook_id(gb, notebook, assignment, student):
    """The id of a student's submitted notebook in the open gradebook `gb`, as nbgrader's
    find_submission_notebook finds it, without the dozen computed scores that loads with the row; None
    where there is none."""
    from nbgrader import api
    return gb.db.query(api.SubmittedNotebook.id)\
        .join(api.Notebook, api.Notebook.id == api.SubmittedNotebook.notebook_id)\
        .join(api.SubmittedAssignment, api.SubmittedAssignment.id == api.SubmittedNotebook.assignment_id)\
        .join(api.Assignment, api.Assignment.id == api.SubmittedAssignment.assignment_id)\
        .filter(api.Notebook.name == notebook, api.Assignment.name == assignment,
                api.SubmittedAssignment.student_id == student)\
        .scalar()


def cell_rows(gb, model, submitted_id):
    """(row, its cell's name, its cell's kind) for every row of `model` (nbgrader's Grade or Comment) in the
    submitted notebook `submitted_id`, in one query (reading `row.name` would load each row's cell, a query
    a row)."""
    from nbgrader import api
    return gb.db.query(model, api.BaseCell.name, api.BaseCell.type)\
        .join(api.BaseCell, api.BaseCell.id == model.cell_id).filter(model.notebook_id == submitted_id)


def gradebook_exists(db_url):
    """False only for a SQLite gradebook whose file is not there yet (opening would create it)."""
    return not (db_url.startswith("sqlite:///") and not Path(db_url.removeprefix("sqlite:///")).exists())


def create_gradebook_as(db_url, model):
    """Where `db_url` is a SQLite gradebook not there yet, make it a copy of the gradebook file `model`
    (atomically: a gradebook made meanwhile by another process is left as it is); else do nothing."""
    if gradebook_exists(db_url):
        return
    path = Path(db_url.removeprefix("sqlite:///"))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    shutil.copyfile(model, partial)
    try:
        os.link(partial, path)
    except OSError:     # made meanwhile by another process, or no hard links here (then no copy: nothing made)
        pass
    finally:
        partial.unlink()


def has_assignment(db_url, assignment_id):
    """Whether the gradebook knows the assignment (`release` or an earlier run put it there)."""
    from nbgrader.api import MissingEntry
    if not gradebook_exists(db_url):
        return False
    with gradebook(db_url) as gb:
        try:
            gb.find_assignment(assignment_id)
            return True
        except MissingEntry:
            return False


def naive_utc(when):
    """nbgrader stores naive UTC datetimes."""
    return when.astimezone(datetime.timezone.utc).replace(tzinfo=None) if when else None


def set_due_date(db_url, assignment_id, due):
    """Store the assignment's due date (an aware datetime), creating the assignment if need be."""
    with gradebook(db_url) as gb:
        gb.update_or_create_assignment(assignment_id, duedate=naive_utc(due))


def due_date(db_url, assignment_id):
    """The assignment's due date in the gradebook (aware UTC), or None (no gradebook, no such
    assignment, no due date)."""
    from nbgrader.api import MissingEntry
    if not gradebook_exists(db_url):
        return None
    with gradebook(db_url) as gb:
        try:
            due = gb.find_assignment(assignment_id).duedate
        except MissingEntry:
            return None
    return due.replace(tzinfo=datetime.timezone.utc) if due else None


def students_with_submissions(db_url, assignment_id):
    """The ids of the students the gradebook holds a submission of the assignment from."""
    from nbgrader.api import MissingEntry
    if not gradebook_exists(db_url):
        return set()
    with warnings.catch_warnings(), gradebook(db_url) as gb:
        warnings.simplefilter("ignore")
        try:
            return {s.student.id for s in gb.find_assignment(assignment_id).submissions}
        except MissingEntry:
            return set()


# ---- outcomes: what the gradebook has no column for, per student ----

def _outcomes_file(course, assignment_id):
    return grading_dir(course) / "outcomes" / f"{assignment_id}.json"


def _read(path):
    return json.loads(path.read_text()) if path.exists() else {}


def _write(path, data, **dumps):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, **dumps))


def save_outcomes(course, assignment_id, submissions):
    """Keep each student's latest outcome (`submission.summary()`) for the class report, the
    export and the feedback zip; `missing` never replaces a graded or not-graded outcome."""
    path = _outcomes_file(course, assignment_id)
    known = _read(path)
    kept = (Status.GRADED, Status.NOT_GRADED)
    known.update({s.student: s.summary() for s in submissions
                  if not (s.status == Status.MISSING and known.get(s.student, {}).get("status") in kept)})
    _write(path, known, indent=1, sort_keys=True)


def update_outcome(course, assignment_id, student, **fields):
    """Change fields of one student's saved outcome (an extension's new lateness); nothing when
    there is none."""
    path = _outcomes_file(course, assignment_id)
    known = _read(path)
    if student in known:
        known[student].update(fields)
        _write(path, known, indent=1, sort_keys=True)


def forget_outcome(course, assignment_id, student, status):
    """Remove one student's saved outcome if it has `status` (an excused student's 'missing')."""
    path = _outcomes_file(course, assignment_id)
    known = _read(path)
    if known.get(student, {}).get("status") == str(status):
        del known[student]
        _write(path, known, indent=1, sort_keys=True)


def load_outcomes(course, assignment_id):
    """The saved outcomes of an assignment, by student (FileNotFoundError before any autograde)."""
    path = _outcomes_file(course, assignment_id)
    if not path.exists():
        raise FileNotFoundError(f"no graded submissions for {assignment_id} in {grading_dir(course)} "
                                "(run autograde first)")
    return json.loads(path.read_text())


def all_outcomes(course):
    """{(assignment, student): outcome} over every assignment graded so far."""
    return {(path.stem, student): outcome
            for path in sorted((grading_dir(course) / "outcomes").glob("*.json"))
            for student, outcome in json.loads(path.read_text()).items()}


# ---- term.json and roster.json ----

def load_term(course):
    """term.json's sections (grader/term.py says what each holds), each present."""
    data = _read(grading_dir(course) / TERM_FILE)
    for key in TERM_SECTIONS:
        data.setdefault(key, {})
    return data


def save_term(course, data):
    _write(grading_dir(course) / TERM_FILE, data, indent=1, sort_keys=True)


def load_roster_record(course):
    """roster.json ({source, updated_at, students}), or None when no roster was imported."""
    path = grading_dir(course) / ROSTER_FILE
    return json.loads(path.read_text()) if path.exists() else None


def save_roster_record(course, record):
    (grading_dir(course) / ROSTER_FILE).write_text(json.dumps(record, indent=1))
