"""nbgrader's own folders: {student}/{assignment}/{assignment}.ipynb (+ timestamp.txt), the
submitted/ folder; {student}+{assignment}+{timestamp}[+{random}]/{assignment}.ipynb, the exchange
inbound."""
import re

from .base import Found, LmsFormat, plain_file, try_time

INBOUND = re.compile(r"(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<time>[^+]+)(?:\+.*)?")


def read_name(relative, path, assignment_id, zone=None):
    parts = relative.parts
    if len(parts) == 3 and parts[1] == assignment_id:                 # submitted/<student>/<aid>/...
        student, stamp_file = parts[0], path.parent / "timestamp.txt"
    elif len(parts) == 2 and INBOUND.fullmatch(parts[0]):           # inbound/<student>+<aid>+<time>/...
        match = INBOUND.fullmatch(parts[0])
        if match["assignment"] != assignment_id:
            return None
        student, stamp_file = match["student"], path.parent / "timestamp.txt"
        if not plain_file(stamp_file):
            return Found(path, login=student, name=student, submitted_at=try_time(match["time"]),
                         preset="nbgrader")
    else:
        return None
    when = try_time(stamp_file.read_text()) if plain_file(stamp_file) else None
    return Found(path, login=student, name=student, submitted_at=when, preset="nbgrader")


FORMAT = LmsFormat("nbgrader", read_name=read_name)
