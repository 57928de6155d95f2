"""The class list: `roster import FILE` stores it in the nbgrader gradebook (its Student table, as
`nbgrader db student import` does), and `course/roster.json` remembers which students it holds.

With a roster, every submission must map to a roster id (identify.py) and the export has one row
per roster student; without one, the students are whoever submitted."""
import csv
import datetime
import json
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from . import compat

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
    """The roster's rows; RosterError saying which row and column is wrong."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(f"no roster file at {path}")
    with path.open(newline="", encoding="utf-8-sig") as handle:     # -sig: Excel's byte-order mark
        reader = csv.DictReader(handle)
        header = [h.strip().lower() for h in reader.fieldnames or []]
        if "id" not in header:
            raise RosterError(f"{path}: the first row must name the columns, including `id`; found "
                              f"{reader.fieldnames or 'nothing'}. Expected: {', '.join(COLUMNS)}")
        unknown = [h for h in header if h not in COLUMNS]
        if unknown:
            raise RosterError(f"{path}: unknown column(s) {', '.join(unknown)}; the roster takes "
                              f"{', '.join(COLUMNS)} (only id is required)")
        students, seen = [], {}
        for line, row in enumerate(reader, start=2):
            values = {h.strip().lower(): (v or "").strip() for h, v in row.items() if h}
            if not any(values.values()):
                continue
            if not values.get("id"):
                raise RosterError(f"{path}, line {line}: the id is empty ({row})")
            student = RosterStudent(**{c: values.get(c, "") for c in COLUMNS})
            if student.id in seen:
                raise RosterError(f"{path}, line {line}: id {student.id!r} is already on line {seen[student.id]}")
            seen[student.id] = line
            students.append(student)
    if not students:
        raise RosterError(f"{path}: no students in the file")
    return students


def import_roster(course, path):
    """Add or update every roster student in the gradebook; returns (added, updated) counts."""
    from nbgrader.api import MissingEntry

    students = read_roster_csv(path)
    course.grading_dir.mkdir(parents=True, exist_ok=True)
    added = updated = 0
    with warnings.catch_warnings(), compat.gradebook(course.db_url) as gb:
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
    marker = {"source": str(Path(path).resolve()), "imported_at": datetime.datetime.now().isoformat(timespec="seconds"),
              "students": sorted(known | {s.id for s in students})}
    (course.grading_dir / "roster.json").write_text(json.dumps(marker, indent=1))
    return added, updated


def roster_ids(course):
    marker = course.grading_dir / "roster.json"
    return json.loads(marker.read_text())["students"] if marker.exists() else None


def load_roster(course):
    """The roster students (from the gradebook), or None when no roster was imported."""
    from nbgrader.api import MissingEntry
    ids = roster_ids(course)
    if ids is None:
        return None
    students = []
    with warnings.catch_warnings(), compat.gradebook(course.db_url) as gb:
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
