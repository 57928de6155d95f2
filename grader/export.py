"""`export`: the grades as CSV, for a spreadsheet or an LMS gradebook import.

    long    one row per student and assignment: status, total (after the late penalty), raw total,
            max, submission time, late, penalty, provisional, then the points of every graded cell
    wide    one row per student (the roster's, when one was imported): `student`, one column per
            assignment holding its total, then `late`, `missing` and `provisional`, each naming the
            assignments concerned
    <lms>   an LMS's gradebook import (canvas, moodle): its module of grader/lms/ writes the rows
            (LmsFormat.export), says whom it left out, and may fill the instructor's own export in
            (canvas --template)

Totals are after the late-submission penalty, computed here on the whole total (written-answer
points graded after autograde included) with the assignment's rule and each student's extension
(grader/term.py). A total is provisional while the submission has written answers (or an
ungradable notebook) waiting for a manual grade. A missing submission is an empty cell, never a 0
that looks earned; an excused one is "EX" (Canvas's mark for excused), left out of Moodle's file.
No cell is ever a formula a spreadsheet would run (grader/csv_cells.py)."""
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import lms, store, term
from .csv_cells import number as _number
from .csv_cells import write_csv
from .late_policy import assignment_penalty, penalty_points
from .submission import Status

OWN_FORMATS = ("long", "wide")          # and each LMS gradebook import (grader/lms/)


def formats():
    """What `export --format` takes."""
    return OWN_FORMATS + lms.export_formats()


@dataclass
class Entry:
    """One student's result for one assignment."""
    student: str
    assignment: str
    status: Status                  # GRADED, NOT_GRADED or MISSING
    total: float | None = None      # after the penalty
    raw_total: float | None = None
    max_score: float = 0.0
    submitted_at: str = ""
    late: bool = False
    seconds_late: float = 0.0
    penalty: float = 0.0
    provisional: bool = False
    cells: dict = field(default_factory=dict)

    @property
    def shown_total(self):
        """The total's cell: points, "EX" when excused, empty when there is none."""
        return "EX" if self.status == Status.EXCUSED else _number(self.total)


def gather(course, assignment_ids=None):
    """(people, assignment names, {(student, assignment): Entry}) from the gradebook; people are
    the roster when one was imported, else every student in the gradebook."""
    from .roster import RosterStudent, roster_ids
    roster = roster_ids(course)
    outcomes = store.all_outcomes(course)   # the late flag an LMS gave where no time says more (Canvas's _LATE_)
    entries, people = {}, {}
    with warnings.catch_warnings(), store.gradebook(course.db_url) as gb:
        warnings.simplefilter("ignore")
        for s in gb.students:
            people[s.id] = RosterStudent.from_gradebook(s)
        assignments = sorted((a for a in gb.assignments if not assignment_ids or a.name in assignment_ids),
                             key=lambda a: a.name)      # the course's order (nbgrader's is by due date)
        for assignment in assignments:
            rule = assignment_penalty(course, assignment.name)
            for submission in assignment.submissions:
                sid = submission.student.id
                graded = any(g.auto_score is not None or g.manual_score is not None
                             for nb in submission.notebooks for g in nb.grades)
                seconds = submission.total_seconds_late      # past the student's own due date
                penalty = penalty_points(rule, sid, submission.score, seconds)
                entry = Entry(sid, assignment.name, Status.GRADED if graded else Status.NOT_GRADED,
                              total=max(0.0, submission.score - penalty), raw_total=submission.score,
                              max_score=assignment.max_score, penalty=penalty, seconds_late=seconds,
                              submitted_at=submission.timestamp.isoformat() + "Z" if submission.timestamp else "",
                              late=seconds > 0 or bool(outcomes.get((assignment.name, sid), {}).get("late")),
                              provisional=bool(submission.needs_manual_grade))
                for nb in submission.notebooks:
                    for grade in nb.grades:
                        entry.cells[grade.name] = grade.score
                entries[(sid, assignment.name)] = entry
        names = [a.name for a in assignments]
        max_scores = {a.name: a.max_score for a in assignments}
    ids = roster if roster is not None else sorted(people)
    for sid in ids:
        for name in names:
            entries.setdefault((sid, name), Entry(sid, name, Status.MISSING, max_score=max_scores[name]))
    for name in names:
        for sid in term.excused(course, name):
            if (sid, name) in entries:
                entries[(sid, name)] = Entry(sid, name, Status.EXCUSED, max_score=max_scores[name])
    return [people.get(i, RosterStudent(i)) for i in ids], names, entries


def rows_long(people, names, entries):
    cells = []
    for entry in entries.values():
        cells += [c for c in entry.cells if c not in cells]
    header = ["student", "assignment", "status", "total", "raw_total", "max", "submitted_at", "late",
              "seconds_late", "penalty", "provisional"] + cells
    rows = []
    for person in people:
        for name in names:
            e = entries[(person.id, name)]
            rows.append([e.student, e.assignment, e.status, _number(e.total), _number(e.raw_total),
                         _number(e.max_score), e.submitted_at, "yes" if e.late else "",
                         _number(e.seconds_late) if e.late else "", _number(e.penalty) if e.penalty else "",
                         "yes" if e.provisional else ""] + [_number(e.cells.get(c)) for c in cells])
    return header, rows


def rows_wide(people, names, entries):
    header = ["student"] + names + ["late", "missing", "provisional"]
    rows = []
    for person in people:
        mine = [entries[(person.id, name)] for name in names]
        rows.append([person.id] + [e.shown_total for e in mine]
                    + [" ".join(e.assignment for e in mine if e.late),
                       " ".join(e.assignment for e in mine if e.status == Status.MISSING),
                       " ".join(e.assignment for e in mine if e.provisional)])
    return header, rows


def export(course, path, fmt="long", assignment_ids=None, template=None, maps=None):
    """Write the CSV; returns (path, data rows, warnings for the instructor). `template`: the
    instructor's Canvas gradebook export, filled in rather than a new file written (canvas only;
    `maps`: {assignment id: Canvas column title})."""
    if fmt not in formats():
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(formats())}")
    writer = None if fmt in OWN_FORMATS else lms.FORMATS[fmt].export
    if template is not None and (writer is None or writer.template is None):
        templates = [name for name in lms.export_formats() if lms.FORMATS[name].export.template is not None]
        raise ValueError(f"--template is the instructor's {' or '.join(t.capitalize() for t in templates)} "
                         f"gradebook export: it goes with --format {' or '.join(templates)}")
    people, names, entries = gather(course, assignment_ids)
    if template is not None:
        return writer.template(Path(path), people, names, entries, template, maps)
    if writer is not None and writer.one_assignment and len(names) != 1:
        raise ValueError(f"the {fmt} format holds one assignment ({fmt.capitalize()}'s import clears a grade for an "
                         f"empty cell, so each file carries only the students graded in it): name one of "
                         f"{', '.join(names) or 'none graded yet'}, e.g. `export {names[0] if names else 'ID'} "
                         f"--format {fmt}`")
    rows_of = {"long": rows_long, "wide": rows_wide}[fmt] if writer is None else writer.rows
    header, rows = rows_of(people, names, entries)
    notes = writer.notes(people, names, entries) if writer is not None and writer.notes else []
    listed = {p.id for p in people}      # a dropped student's grades stay in the gradebook, out of every export
    provisional = sorted({f"{e.student}/{e.assignment}" for e in entries.values() if e.provisional
                          and e.student in listed})
    if provisional:
        notes.append(f"{len(provisional)} total(s) are provisional (written answers or ungraded notebooks "
                     f"wait for a manual grade): {', '.join(provisional[:8])}{' ...' if len(provisional) > 8 else ''}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(path, header, rows)
    return path, len(rows), notes


def parse_maps(values):
    """`--map ID="Column title"` options -> {assignment id: column title}."""
    maps = {}
    for value in values or []:
        aid, sep, column = value.partition("=")
        if not sep or not aid.strip() or not column.strip():
            raise ValueError(f"--map {value!r}: expected ASSIGNMENT_ID=\"Canvas column title (12345)\"")
        maps[aid.strip()] = column.strip().strip('"')
    return maps
