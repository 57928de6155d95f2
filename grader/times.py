"""Times as the course reads them: aware UTC, a naive time read in the LMS's zone or this machine's."""
import datetime
import re


def local_time(naive_or_aware, zone=None):
    """A datetime as aware UTC; a naive one is read in `zone` (an IANA name such as Europe/Berlin,
    the LMS's zone), else in this machine's time zone (as an instructor types a deadline)."""
    value = naive_or_aware
    if value.tzinfo is None:
        value = value.replace(tzinfo=time_zone(zone)) if zone else value.astimezone()
    return value.astimezone(datetime.timezone.utc)


def time_zone(name):
    """The zone called `name`; ValueError naming the problem for an unknown one."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(f"unknown time zone {name!r}: give an IANA name such as Europe/Berlin or "
                         "America/New_York") from error


def parse_time(text, zone=None):
    """'2026-10-01 23:59', '2026-10-01T23:59:00-05:00', nbgrader's '2026-10-01 12:00:00.123 UTC',
    Blackboard's '2026-10-01-23-59-00', Moodle's 'Thursday, 1 October 2026, 11:59 PM' -> aware UTC
    datetime, reading a time without an offset in `zone` (default: this machine's); ValueError with
    the forms it takes."""
    if zone:
        time_zone(zone)                     # an unknown zone is its own error, not a bad time
    text = text.strip()
    blackboard = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)-(\d\d)-(\d\d)-(\d\d)", text)
    if blackboard:
        return local_time(datetime.datetime(*map(int, blackboard.groups())), zone)
    try:
        from dateutil import parser
        return local_time(parser.parse(text), zone)
    except (ValueError, OverflowError) as error:
        raise ValueError(f"cannot read {text!r} as a date and time; expected e.g. '2026-10-01 23:59' "
                         "(this machine's time zone) or '2026-10-01T23:59:00+02:00'") from error
