"""`export`: the grades as CSV, for a spreadsheet or an LMS gradebook import.

    long    one row per student and assignment: status, total (after the late penalty), raw total,
            max, submission time, late, penalty, provisional, then the points of every graded cell
    wide    one row per student (the roster's, when one was imported): `student`, one column per
            assignment holding its total, then `late`, `missing` and `provisional`, each naming the
            assignments concerned
    canvas  Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, one column
            per assignment (ID is the roster's lms_user_id, Canvas's user id)
    moodle  Moodle's grade import (CSV): First name, Last name, Email address, one assignment's
            column; only students with an e-mail address and a grade (Moodle's import clears a
            grade for an empty cell and stops at a row it cannot match); map "Email address" to
            the user's email when importing

Totals are after the late-submission penalty, computed here on the whole total (written-answer
points graded after autograde included) with the assignment's rule and each student's extension
(grader/term.py). A total is provisional while the submission has written answers (or an
ungradable notebook) waiting for a manual grade. A missing submission is an empty cell, never a 0
that looks earned; an excused one is "EX" (Canvas's mark for excused), left out of Moodle's file.
No cell is ever a formula a spreadsheet would run (grader/csv_cells.py)."""
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import store, term
from .csv_cells import is_formula, write_csv
from .late_policy import assignment_penalty, penalty_points
from .lms import export_formats
from .submission import Status

FORMATS = ("long", "wide") + export_formats()   # and each LMS gradebook import (grader/lms/); cli.py lists the same


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


def _number(value):
    return "" if value is None else f"{value:g}"


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


def rows_canvas(people, names, entries):
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + names
    rows = [["Points Possible", "", "", "", ""] + [_number(entries[(people[0].id, n)].max_score) if people else ""
                                                   for n in names]]
    for person in people:
        name = ", ".join(p for p in (person.last_name, person.first_name) if p) or person.id
        rows.append([name, person.lms_user_id, "", person.id, ""]
                    + [entries[(person.id, n)].shown_total for n in names])
    return header, rows


def rows_moodle(people, names, entries):
    """Moodle's grade import clears a grade for an empty cell and stops at a row it cannot match
    (grade/import/csv/classes/load_data.php): one assignment, and only the rows that have both an
    e-mail address and a grade. An address a spreadsheet would read as a formula is left out too:
    written with the quote that disarms it, it would match nobody (grader/csv_cells.py)."""
    header = ["First name", "Last name", "Email address"] + names
    rows = [[p.first_name, p.last_name, p.email] + [_number(entries[(p.id, n)].total) for n in names]
            for p in people if p.email and not is_formula(p.email)
            and all(entries[(p.id, n)].total is not None for n in names)]
    return header, rows


def _moodle_left_out(people, names, entries):
    """Who rows_moodle leaves out, and why, for the instructor."""
    notes = []
    no_email = [p.id for p in people if not p.email]
    if no_email:
        notes.append(f"left out, no e-mail address (Moodle matches rows by it; import a roster with email): "
                     f"{', '.join(no_email)}")
    formula = [p.id for p in people if is_formula(p.email)]
    if formula:
        notes.append(f"left out, an e-mail address a spreadsheet would run as a formula (written safely it would "
                     f"match nobody in Moodle; enter the grade there by hand): {', '.join(formula)}")
    excused = [p.id for p in people if p.email and p.id not in formula
               and any(entries[(p.id, n)].status == Status.EXCUSED for n in names)]
    if excused:
        notes.append(f"left out, excused (Moodle's import has no mark for it; excuse them in Moodle): "
                     f"{', '.join(excused)}")
    no_grade = [p.id for p in people if p.email and p.id not in excused and p.id not in formula
                and any(entries[(p.id, n)].total is None for n in names)]
    if no_grade:
        notes.append(f"left out, no grade to send (an empty cell would clear the grade in Moodle): "
                     f"{', '.join(no_grade)}")
    return notes


def export(course, path, fmt="long", assignment_ids=None, template=None, maps=None):
    """Write the CSV; returns (path, data rows, warnings for the instructor). `template`: the
    instructor's Canvas gradebook export, filled in rather than a new file written (canvas only;
    `maps`: {assignment id: Canvas column title})."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if template is not None and fmt != "canvas":
        raise ValueError("--template is the instructor's Canvas gradebook export: it goes with --format canvas")
    people, names, entries = gather(course, assignment_ids)
    if template is not None:
        return _export_into_template(Path(path), people, names, entries, template, maps)
    if fmt == "moodle" and len(names) != 1:
        raise ValueError(f"the moodle format holds one assignment (Moodle's import clears a grade for an empty "
                         f"cell, so each file carries only the students graded in it): name one of "
                         f"{', '.join(names) or 'none graded yet'}, e.g. `export {names[0] if names else 'ID'} "
                         f"--format moodle`")
    header, rows = {"long": rows_long, "wide": rows_wide, "canvas": rows_canvas, "moodle": rows_moodle}[fmt](
        people, names, entries)
    notes = _moodle_left_out(people, names, entries) if fmt == "moodle" else []
    if fmt == "canvas" and any(not p.lms_user_id for p in people):
        lacking = [p.id for p in people if not p.lms_user_id]
        notes.append(f"{len(lacking)} student(s) without an lms_user_id ({', '.join(lacking[:5])}...): Canvas "
                     "matches them by SIS Login ID only; import a roster with lms_user_id")
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


def _export_into_template(path, people, names, entries, template, maps):
    from .canvas_template import fill_template
    totals = {(p.lms_user_id, n): "EX" if entries[(p.id, n)].status == Status.EXCUSED else entries[(p.id, n)].total
              for p in people if p.lms_user_id for n in names}
    text, filled, notes = fill_template(template, names, totals, maps)
    lacking = [p.id for p in people if not p.lms_user_id]
    if lacking:
        notes.append(f"not written, no lms_user_id (Canvas matches rows by its ID column): {', '.join(lacking)}")
    notes.insert(0, "filled: " + "; ".join(f"{aid} -> {title}" for aid, title in filled))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    written = sum(1 for p in people if p.lms_user_id and any(entries[(p.id, aid)].total is not None
                                                                for aid, _ in filled))
    return path, written, notes
