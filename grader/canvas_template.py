"""`export --format canvas --template GRADEBOOK.csv`: the instructor's own Canvas gradebook export
with this course's totals written into its assignment columns, and every other byte as Canvas
wrote it, so that Canvas's import (Grades > Import) changes those columns only.

Canvas matches a row to a student by its `ID` (the user id; the roster's `lms_user_id`) and a
column to an assignment by the id in parentheses of `<title> (<id>)` (canvas-lms
lib/gradebook_importer.rb). A course assignment goes into the column whose title is its id (or its
id with `_` read as spaces), or the one `--map a1_self_attention="Assignment 1 (12345)"` names. A
student without a total here keeps the cell Canvas had: an empty cell would clear a grade. A cell a
spreadsheet would run as a formula (a student's name `=HYPERLINK(...)`) is written with the quote
that disarms it (grader/csv_cells.py); Canvas matches the row by its `ID`, digits, never touched."""
import csv
import io
import re
from pathlib import Path

from .csv_cells import is_formula, safe_row
from .lms_records import read_text

TITLE_WITH_ID = re.compile(r"\A(.*)\s\((\d+)\)\Z")     # Canvas's "<title> (<id>)"


def parse_maps(values):
    """`--map ID="Column title"` options -> {assignment id: column title}."""
    maps = {}
    for value in values or []:
        aid, sep, column = value.partition("=")
        if not sep or not aid.strip() or not column.strip():
            raise ValueError(f"--map {value!r}: expected ASSIGNMENT_ID=\"Canvas column title (12345)\"")
        maps[aid.strip()] = column.strip().strip('"')
    return maps


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
