"""A made-up LMS, "Quizhub", written as a new LMS module of grader/lms/ would be (the worked example
in docs/architecture.md). It is not shipped: tests/test_lms_example.py registers it for one test.

    {username}__{YYYYMMDDTHHMMSSZ}__{original name}   flat; the time is UTC
Its feedback upload reads {username}__feedback.html."""
import datetime
import re

from grader.lms.base import Found, LmsFormat

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


FORMAT = LmsFormat("quizhub", user="Quizhub user", read_name=read_name, feedback_name=feedback_name)
