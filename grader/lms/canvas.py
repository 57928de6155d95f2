"""Canvas: {sortablename}_[LATE_]{userid}_{attachmentid}_{original name}[-N].ext, flat.

    [LATE_]anon_{anonymousid}_{attachmentid}_{original name}  (anonymous grading)
    {group name}_[LATE_]{userid}_{attachmentid}_{original name}  (a group assignment: one file per
    group, the name part the group's, the user id one member's)
LATE_ when Canvas counted it late; -1, -2 ... when the same name was uploaded again (canvas-lms
lib/content_zipper.rb, Assignment#representatives). Its feedback zip ("Re-Upload Submissions")
takes the first two all-digit `_` parts of a name as the user id and the id of a file in their
submission (canvas-lms Assignment#infer_comment_context_from_filename), so an anonymous submission's
page carries the user id its records paired with the anonymous id.

Its class list is the gradebook export (Grades > Export: Student "Doe, Jane", ID (the user id), SIS
User ID, SIS Login ID, ..., Section, the assignments; its Points Possible and Manual Posting rows
skipped: canvas-lms lib/gradebook_exporter.rb); its group set export (GET
/api/v1/group_categories/:id/export: name, canvas_user_id, [user_id,] login_id, sections,
group_name, [canvas_group_id, group_id]; an empty group_name is in no group:
app/controllers/group_categories_controller.rb, #export). Its gradebook import takes Student, ID,
SIS User ID, SIS Login ID, Section, one column per assignment (ID is the roster's lms_user_id), or
the instructor's own gradebook export filled in (`--template`, below)."""
import csv
import io
import re
from pathlib import Path

from ..csv_cells import is_formula, number, safe_row
from ..status import Status
from .base import (
    SAFE_ID,
    CsvForm,
    Found,
    GradesExport,
    LmsFormat,
    anonymous_warning,
    named_id,
    records,
    slug,
    unaddressed,
)
from .records import read_text

# the name part keeps letters, digits and underscores (Canvas drops the rest and every "_<digits>_")
NAME = re.compile(r"(?:(?P<name>[^/]+?)_)??(?P<late>late_)?(?P<uid>\d+|anon_[A-Za-z0-9]+)_(?P<sid>\d+)_"
                     r"(?P<orig>.+?)(?:-(?P<rev>\d+))?(?P<ext>\.[A-Za-z0-9]+)?", re.IGNORECASE)


def read_name(relative, path, assignment_id, zone=None):
    match = NAME.fullmatch(relative.name)
    if len(relative.parts) != 1 or not match:
        return None
    return Found(path, login=match["uid"], name=match["name"] or "", lms_late=bool(match["late"]),
                 revision=int(match["rev"] or 0), preset="canvas")


def feedback_name(outcome, assignment_id):
    match = NAME.fullmatch(outcome.get("lms_name", ""))
    uid = outcome.get("lms_user_id") or (match["uid"] if match else "")
    if match is None or uid.startswith("anon_"):
        return None, unaddressed(outcome, "canvas", anonymous=uid.startswith("anon_"))
    return f"{match['name'] or 'student'}_{uid}_{match['sid']}_{assignment_id}-feedback.html", None



def anonymous(submission):
    """Anonymous grading: anon_<id>, unless its records paired it with the user id."""
    return submission.login.startswith("anon_") and not submission.lms_user_id


def anonymous_advice(logins, reach):
    return anonymous_warning(logins, reach, "Canvas's anonymous grading: ",
                             "give --times the submissions JSON saved by an account with administrator access (only "
                             "it pairs each anonymous_id with its user_id), or download the submissions again once "
                             "Canvas shows the students' names (grades posted, or anonymous grading turned off) and "
                             "grade that download")


def roster_name(student):
    """The sortable name Canvas writes in a download's names: "doejane"."""
    return student.last_name + student.first_name


def roster_rows(header, rows):
    students = []
    for line, values in records(header, rows):
        name = values.get("student", "")
        if "points possible" in name.lower() or not values.get("id", "").isdigit() or name == "Student, Test":
            continue        # the Points Possible and Manual Posting rows; Canvas's own test student
        last, _, first = name.partition(",")
        login = values.get("sis login id") or values.get("sis user id")
        student_id = login or f"{slug(last + first)}_{values['id']}"      # as default_id names them
        students.append((line, dict(id=student_id, first_name=first.strip(), last_name=last.strip(), email="",
                                    lms_user_id=values["id"])))
    return students


def group_rows(header, rows):
    entries = []
    name_column = "name" if "name" in header else header[0]
    for _, values in records(header, rows):
        if not values.get("group_name"):
            continue                                  # in no group of this set
        sortable = values.get(name_column, "")
        last, _, first = sortable.partition(",")
        uid, sis, login = values.get("canvas_user_id", ""), values.get("user_id", ""), values.get("login_id", "")
        default = login or sis or f"{slug(last + first)}_{uid}"      # as the roster's canvas import names them
        entries.append((values["group_name"], dict(key=sortable or uid, keys=tuple(k for k in (uid, sis, login) if k),
                                                   name=f"{first.strip()} {last.strip()}".strip(),
                                                   names=(slug(first + last), slug(last + first)),
                                                   default_id=SAFE_ID.sub("_", default))))
    return entries


def export_rows(people, names, entries):
    header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + names
    rows = [["Points Possible", "", "", "", ""] + [number(entries[(people[0].id, n)].max_score) if people else ""
                                                   for n in names]]
    for person in people:
        name = ", ".join(p for p in (person.last_name, person.first_name) if p) or person.id
        rows.append([name, person.lms_user_id, "", person.id, ""]
                    + [entries[(person.id, n)].shown_total for n in names])
    return header, rows


def export_notes(people, names, entries):
    lacking = [p.id for p in people if not p.lms_user_id]
    if not lacking:
        return []
    return [f"{len(lacking)} student(s) without an lms_user_id ({', '.join(lacking[:5])}...): Canvas "
            "matches them by SIS Login ID only; import a roster with lms_user_id"]


# `export --format canvas --template GRADEBOOK.csv`: the instructor's own Canvas gradebook export
# with this course's totals written into its assignment columns, and every other byte as Canvas
# wrote it, so that Canvas's import (Grades > Import) changes those columns only.
#
# Canvas matches a row to a student by its `ID` (the user id; the roster's `lms_user_id`) and a
# column to an assignment by the id in parentheses of `<title> (<id>)` (canvas-lms
# lib/gradebook_importer.rb). A course assignment goes into the column whose title is its id (or its
# id with `_` read as spaces), or the one `--map a1_self_attention="Assignment 1 (12345)"` names. A
# student without a total here keeps the cell Canvas had: an empty cell would clear a grade. A cell a
# spreadsheet would run as a formula (a student's name `=HYPERLINK(...)`) is written with the quote
# that disarms it (grader/csv_cells.py); Canvas matches the row by its `ID`, digits, never touched.


def export_into_template(path, people, names, entries, template, maps):
    """Write the instructor's Canvas gradebook export `template` with the totals filled in to `path`;
    returns (path, rows written, notes)."""
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


TITLE_WITH_ID = re.compile(r"\A(.*)\s\((\d+)\)\Z")     # Canvas's "<title> (<id>)"


def fill_template(template, names, totals, maps=None):
    """The template's text with totals[(lms user id, assignment id)] written into each assignment's
    column; returns (text, [(assignment id, column title)], notes)."""
    text = read_text(template, ValueError)
    bom = "\ufeff" if Path(template).read_bytes().startswith(b"\xef\xbb\xbf") else ""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"{template} is empty: download the gradebook from Canvas (Grades > Export)")
    delimiter = ";" if lines[0].count(";") > lines[0].count(",") else ","
    header = next(csv.reader([lines[0]], delimiter=delimiter))
    if len(header) < 2 or "Student" not in header[0] or "ID" not in header[1]:
        raise ValueError(f"{template} is not Canvas's gradebook export: its first row should start "
                         f"Student, ID, ... (found {header[:4]})")
    columns = _columns(template, header, names, maps or {})
    notes, out = [], [_written(header, delimiter) if any(map(is_formula, header)) else lines[0]]
    for line in lines[1:]:
        row = next(csv.reader([line], delimiter=delimiter)) if line else []
        user = row[1].strip() if len(row) > 1 else ""
        changes = {index: totals[(user, aid)] for aid, index in columns.items()
                   if user.isdigit() and totals.get((user, aid)) is not None}
        if not changes and not any(map(is_formula, row)):
            out.append(line)                       # Points Possible, Manual Posting, students not graded here
            continue
        for index, value in changes.items():
            row[index] = value if isinstance(value, str) else f"{value:g}"   # "EX": excused
        out.append(_written(row, delimiter))
    filled = [(aid, header[index]) for aid, index in columns.items()]
    graded_users = {user for user, _ in totals}
    in_file = {next(csv.reader([line], delimiter=delimiter))[1].strip() for line in lines[1:] if line.count(delimiter)}
    absent = sorted(graded_users - in_file)
    if absent:
        notes.append(f"graded here but not in the Canvas gradebook (by lms_user_id): {', '.join(absent)}")
    return bom + newline.join(out) + (newline if text.endswith(("\n", "\r")) else ""), filled, notes


def _written(row, delimiter):
    """One row as CSV text, every cell through csv_cells.safe_row."""
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator="").writerow(safe_row(row))
    return buffer.getvalue()


def _columns(template, header, names, maps):
    """{assignment id: column index} for every assignment the template has a column for."""
    found = {}
    for aid in names:
        wanted = maps.get(aid)
        for index, title in enumerate(header):
            match = TITLE_WITH_ID.match(title.strip())
            if wanted is not None:
                hit = title.strip() == wanted or (match and wanted == match.group(1).strip())
            else:
                hit = match is not None and match.group(1).strip().lower() in (aid.lower(),
                                                                               aid.replace("_", " ").lower())
            if hit:
                found[aid] = index
                break
        else:
            if wanted is not None:
                raise ValueError(f"--map {aid}={wanted!r}: no such column in {template}; its assignment columns: "
                                 + ", ".join(t for t in header if TITLE_WITH_ID.match(t.strip())))
    if not found:
        raise ValueError(f"none of {', '.join(names)} has a column in {template}: name each with "
                         f"--map {names[0] if names else 'ID'}=\"<Canvas column title (id)>\"")
    return found


FORMAT = LmsFormat(
    "canvas", user="Canvas user", read_name=read_name, feedback_name=feedback_name,
    roster=CsvForm("Canvas's gradebook export (Student, ID, ...)",
                   matches=lambda header: len(header) > 1 and "student" in header[0] and header[1] == "id",
                   rows=roster_rows),
    groups=CsvForm("Canvas's group set export (name, canvas_user_id, login_id, ..., group_name)",
                   matches=lambda header: "canvas_user_id" in header and "group_name" in header,
                   rows=group_rows, nobody=" (every group_name is empty)"),
    export=GradesExport(export_rows, notes=export_notes, template=export_into_template),
    default_id=named_id, roster_name=roster_name, anonymous=anonymous, anonymous_advice=anonymous_advice,
    anonymous_prefix="anon_")
