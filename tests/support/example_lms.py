"""A made-up LMS, "Quizhub", written as a new LMS module of grader/lms/ would be (the worked example
in docs/architecture.md). It is not shipped: tests/test_lms_example.py registers it for one test.

    {username}__{YYYYMMDDTHHMMSSZ}__{original name}   flat; the time is UTC
Its feedback upload reads {username}__feedback.html. Its class list is a CSV of Username, Display
name, Email; its teams a CSV of Team, Username; its gradebook import a CSV of Username and one
column per assignment, a student without a total left out."""
import datetime
import re

from grader.csv_cells import number
from grader.lms.base import CsvForm, Found, GradesExport, LmsFormat, records

NAME = re.compile(r"(?P<user>[a-z0-9.]+)__(?P<time>\d{8}T\d{6})Z__(?P<orig>.+)")


def read_name(relative, path, assignment_id, zone=None):
    match = NAME.fullmatch(relative.name) if len(relative.parts) == 1 else None
    if not match:
        return None
    when = datetime.datetime.strptime(match["time"], "%Y%m%dT%H%M%S").replace(tzinfo=datetime.UTC)
    return Found(path, login=match["user"], name=match["user"], submitted_at=when, preset="quizhub")


def feedback_name(outcome, assignment_id):
    match = NAME.fullmatch(outcome.get("lms_name", ""))
    if match is None:
        return None, f"the download's name {outcome.get('lms_name')!r} is not Quizhub's"
    return f"{match['user']}__feedback.html", None


def roster_rows(header, rows):                      # [(line, RosterStudent's fields)]
    students = []
    for line, values in records(header, rows):
        first, _, last = values.get("display name", "").partition(" ")
        students.append((line, dict(id=values["username"], first_name=first, last_name=last,
                                    email=values.get("email", ""))))
    return students


def group_rows(header, rows):                       # [(group name, Member's fields)]
    return [(values["team"], dict(key=values["username"], keys=(values["username"],), default_id=values["username"]))
            for _, values in records(header, rows) if values.get("team")]


def export_rows(people, names, entries):            # (header, rows); entries[(student id, assignment)]
    rows = [[p.id] + [number(entries[(p.id, n)].total) for n in names]
            for p in people if all(entries[(p.id, n)].total is not None for n in names)]
    return ["Username"] + names, rows


def export_notes(people, names, entries):
    left_out = [p.id for p in people if any(entries[(p.id, n)].total is None for n in names)]
    return [f"left out, no total: {', '.join(left_out)}"] if left_out else []


FORMAT = LmsFormat(
    "quizhub", user="Quizhub user", read_name=read_name, feedback_name=feedback_name,
    roster=CsvForm("Quizhub's class list (Username, Display name, Email)",
                   matches=lambda header: header[:2] == ["username", "display name"], rows=roster_rows),
    groups=CsvForm("Quizhub's team list (Team, Username)",
                   matches=lambda header: header[:2] == ["team", "username"], rows=group_rows),
    export=GradesExport(export_rows, notes=export_notes))
