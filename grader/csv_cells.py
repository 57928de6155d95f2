"""Every CSV the grader writes is safe to open in a spreadsheet.

Excel, LibreOffice and Google Sheets read a cell whose text begins with `=`, `+`, `-`, `@`, a tab
or a carriage return as a formula, so a student who calls themselves `=HYPERLINK(...)` in Moodle (or
whose roster id or e-mail begins so) would have it run on the instructor's machine when the export
is opened ("CSV injection"). OWASP's rule, applied here to every cell of every CSV the grader writes
(export.py, the LMS gradebook imports of grader/lms/, similarity.py): such a cell is prefixed with a
single quote, which a spreadsheet shows as text. A number (`-3.5`, `+2`, `1e-3`) is not text and stays as it is.

A quote changes the text, so a column an LMS importer matches students by cannot take one and
still match. Canvas matches by `ID` (its user id, digits only, never touched) before any other
column; Moodle by the column the instructor maps (`Email address`), so the `moodle` export leaves
out, and names, a student whose e-mail address would need the quote (grader/export.py)."""
import csv
import re

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def is_formula(value):
    """True for text a spreadsheet would run: it begins with one of FORMULA_STARTS and is no number."""
    return isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(value)


def safe_cell(value):
    """The cell as written: `'` + the text where a spreadsheet would read a formula, else as it is."""
    return "'" + value if is_formula(value) else value


def number(value):
    """A number's cell: `3`, `2.5`; empty for None."""
    return "" if value is None else f"{value:g}"


def safe_row(row):
    return [safe_cell(value) for value in row]


def write_csv(path, header, rows):
    """Write a CSV of `header` and `rows` (UTF-8, `,`), every cell through safe_cell."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(safe_row(header))
        writer.writerows(safe_row(row) for row in rows)
