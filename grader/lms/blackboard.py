"""Blackboard: {assignment}_{username}_attempt_{YYYY-MM-DD-HH-MM-SS}[_{original name}].ext, flat;
the attempt's .txt receipt (no original name) is its note about the attempt, not a submission."""
import re

from ..times import parse_time
from .base import Found, LmsFormat

NAME = re.compile(r"(?P<assignment>.+)_(?P<user>[^_]+)_attempt_"
                         r"(?P<time>\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)(?:_(?P<orig>.+))?")


def read_name(relative, path, assignment_id, zone=None):
    match = NAME.fullmatch(relative.stem) if len(relative.parts) == 1 else None
    if not match:
        return None
    return Found(path, login=match["user"], name=match["user"], submitted_at=parse_time(match["time"], zone),
                 preset="blackboard", receipt=match["orig"] is None and relative.suffix == ".txt")


FORMAT = LmsFormat("blackboard", user="Blackboard user", read_name=read_name)
