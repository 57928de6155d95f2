"""The class list: `roster import FILE` stores it in the nbgrader gradebook (its Student table, as
`nbgrader db student import` does), and `course/roster.json` remembers which students it holds.

It reads the class list as the LMS exports it, and says which form it found:
    course     the columns nbgrader takes: id, first_name, last_name, email, lms_user_id (id required)
    <lms>      an LMS's own class list (Canvas's gradebook export, Moodle's participants download):
               its module of grader/lms/ reads it (LmsFormat.roster), and names the form
with `,` or `;` between the fields, in UTF-8 with or without a byte-order mark. Students keep the
id the course gave them; a student who left is dropped from the roster (`roster drop`, or
`roster import --replace`), which takes them out of every export while their grades stay in the
gradebook.

With a roster, every submission must map to a roster id (identify.py) and the export has one row
per roster student; without one, the students are whoever submitted."""
import datetime
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from . import lms, store
from .lms.base import records
from .lms.records import csv_rows, read_text

COLUMNS = ("id", "first_name", "last_name", "email", "lms_user_id")


class RosterError(ValueError):
    pass


@dataclass
class RosterStudent:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""

    @classmethod
    def from_gradebook(cls, student):
        """From nbgrader's Student record (its empty fields are None)."""
        return cls(student.id, student.first_name or "", student.last_name or "", student.email or "",
                   student.lms_user_id or "")

    @property
    def display(self):
        return " ".join(p for p in (self.first_name, self.last_name) if p) or self.id


def read_roster_csv(path):
    """(the roster's students, the form it was read as: course, or the LMS whose class list it is);
    RosterError saying which row and column is wrong."""
    path = Path(path)
    rows = csv_rows(read_text(path, RosterError))
    header = [cell.strip() for cell in rows[0]] if rows else []
    lowered = [cell.lower() for cell in header]
    forms = {name: f.roster for name, f in lms.FORMATS.items() if f.roster is not None}
    if "id" in lowered and "student" not in lowered:
        form, students = "course", _course_rows(path, lowered, rows[1:])
    else:
        form = next((name for name, reader in forms.items() if reader.matches(lowered)), None)
        if form is None:
            raise RosterError(f"{path}: not a class list this course reads: its first row should name the columns "
                              f"{', '.join(COLUMNS)} (only id is required), or be "
                              f"{' or '.join(reader.what for reader in forms.values())}; found {header or 'nothing'}")
        students = [(line, RosterStudent(**fields)) for line, fields in forms[form].rows(lowered, rows[1:])]
    seen = {}
    for line, student in students:
        if not student.id:
            raise RosterError(f"{path}, line {line}: the id is empty")
        if student.id in seen:
            raise RosterError(f"{path}, line {line}: id {student.id!r} is already on line {seen[student.id]}")
        seen[student.id] = line
    if not students:
        raise RosterError(f"{path}: no students in the file")
    return [student for _, student in students], form


def _course_rows(path, header, rows):
    unknown = [h for h in header if h and h not in COLUMNS]
    if unknown:
        raise RosterError(f"{path}: unknown column(s) {', '.join(unknown)}; the roster takes "
                          f"{', '.join(COLUMNS)} (only id is required)")
    return [(line, RosterStudent(**{c: values.get(c, "") for c in COLUMNS}))
            for line, values in records(header, rows)]


def import_roster(course, path, replace=False):
    """Add or update every student of the file in the gradebook; with `replace`, the roster is
    exactly the file's students (who left is dropped). Returns (added, updated, form read, ids
    dropped)."""
    from nbgrader.api import MissingEntry

    students, form = read_roster_csv(path)
    course.grading_dir.mkdir(parents=True, exist_ok=True)
    added = updated = 0
    with warnings.catch_warnings(), store.gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")
        for student in students:
            fields = {k: v or None for k, v in asdict(student).items() if k != "id"}
            try:
                gb.find_student(student.id)
                updated += 1
            except MissingEntry:
                added += 1
            gb.update_or_create_student(student.id, **fields)
    known = set(roster_ids(course) or [])
    ids = {s.id for s in students}
    dropped = sorted(known - ids) if replace else []
    _write_roster(course, (ids if replace else known | ids), source=path)
    return added, updated, form, dropped


def drop_students(course, ids):
    """Take students off the roster (their grades stay in the gradebook); RosterError for an id the
    roster does not have."""
    known = roster_ids(course)
    if known is None:
        raise RosterError("no roster imported yet: python -m grader roster import FILE.csv")
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise RosterError(f"not on the roster: {', '.join(unknown)} (`python -m grader roster show` lists it)")
    _write_roster(course, set(known) - set(ids))


def _write_roster(course, ids, source=None):
    previous = store.load_roster_record(course) or {}
    record = {"source": str(Path(source).resolve()) if source else previous.get("source"),
              "updated_at": datetime.datetime.now().isoformat(timespec="seconds"), "students": sorted(ids)}
    store.save_roster_record(course, record)


def roster_ids(course):
    record = store.load_roster_record(course)
    return None if record is None else record["students"]


def load_roster(course):
    """The roster students (from the gradebook), or None when no roster was imported."""
    from nbgrader.api import MissingEntry
    ids = roster_ids(course)
    if ids is None:
        return None
    students = []
    with warnings.catch_warnings(), store.gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")
        for student_id in ids:
            try:
                found = gb.find_student(student_id)
            except MissingEntry:
                continue
            students.append(RosterStudent.from_gradebook(found))
    return students


def format_roster(students):
    rows = [COLUMNS] + [tuple(getattr(s, c) for c in COLUMNS) for s in students]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip() for r in rows)
