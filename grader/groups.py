"""Group submissions: one file graded for every member of the group (`autograde --groups FILE`).

An LMS's download holds one file per group: Canvas names a group assignment's file after the group
(the user id in it is one member's: canvas-lms Assignment#representatives), Moodle's team
submissions put it in the folder <Group name>_<group id>_assignsubmission_file
(mod/assign/classes/downloader.php), GitHub Classroom's group assignments name the repository
<slug>-<team name>. Who is in each group comes from FILE, in one of these forms:

    plain      a CSV with the columns `group` and `student` (one row per member; the student as the
               roster knows them: roster id, login, LMS user id or e-mail)
    <lms>      an LMS's own group set (Canvas's group set export, Moodle's participants download with
               its Groups column): its module of grader/lms/ reads it (LmsFormat.groups)

Without FILE, a Moodle grading worksheet of team submissions (--worksheet) names every participant's
team in its Group column (mod/assign/gradingtable.php, col_team): the teams are read from it.

A file of the download is a group's when its name is the group's name (compared as letters and
digits, lowercased: Canvas's "team7" is the group "Team 7"). Every member becomes a submission of
their own whose notebook is the group's, noted "group <name>". A Moodle team's folder carries the
group's id, which is no participant's: a member's feedback is named by their own participant
number, from the worksheet (stages/identify.py), never by the folder's."""
from dataclasses import dataclass, field
from pathlib import Path

from . import lms
from .lms import DEFAULT_TEAM, SAFE_ID, default_team, format_of
from .lms.base import records
from .lms.base import slug as _slug
from .lms.records import csv_rows, read_text
from .submission import Status, Submission


class GroupsError(ValueError):
    """A --groups file that cannot be used; the message says what was expected and what came back."""


@dataclass
class Member:
    key: str                                    # how the file names them (for messages)
    keys: tuple = ()                            # what they can be matched by: ids, logins, e-mail
    name: str = ""                              # a readable name, when the file gives one
    names: tuple = ()                           # their name as letters and digits, both orders
    default_id: str = ""                        # their id when there is no roster


@dataclass
class Group:
    name: str
    members: list = field(default_factory=list)


@dataclass
class Groups:
    path: Path
    form: str
    groups: dict                                # slug of the name -> Group

    def find(self, submission):
        """The group whose name the download gives `submission`, or None."""
        for text in (submission.name, submission.login):
            group = self.groups.get(_slug(text)) if text else None
            if group is not None:
                return group
        return None


def read_groups(path):
    """Groups from FILE (plain, or an LMS's group set); GroupsError naming the problem."""
    path = Path(path)
    rows = csv_rows(read_text(path, GroupsError))
    header = [cell.strip().lower() for cell in rows[0]] if rows else []
    forms = {name: f.groups for name, f in lms.FORMATS.items() if f.groups is not None}
    if "group" in header and "student" in header:
        form, entries = "plain", _plain(path, header, rows[1:])
    else:
        form = next((name for name, reader in forms.items() if reader.matches(header)), None)
        if form is None:
            raise GroupsError(
                f"{path}: not a list of groups this course reads: its first row should name the columns `group` "
                f"and `student` (one row per member), or be {' or '.join(reader.what for reader in forms.values())}; "
                f"found {[cell.strip() for cell in rows[0]] if rows else 'nothing'}")
        entries = [(name, Member(**fields)) for name, fields in forms[form].rows(header, rows[1:])]
    groups = {}
    for group_name, member in entries:
        slug = _slug(group_name)
        if not slug:
            raise GroupsError(f"{path}: the group name {group_name!r} has no letter or digit to match a file by")
        group = groups.setdefault(slug, Group(group_name))
        if member is not None and all(m.keys != member.keys for m in group.members):
            group.members.append(member)
    if not groups:
        raise GroupsError(f"{path}: read as {form}, but it puts nobody in a group"
                          + (forms[form].nobody if form in forms else ""))
    return Groups(path, form, groups)


def _plain(path, header, rows):
    entries = []
    for line, values in records(header, rows):
        if not values.get("group"):
            raise GroupsError(f"{path}, line {line}: the group is empty (each row is `group,student`)")
        student = values.get("student", "")
        entries.append((values["group"], Member(student, (student,), default_id=SAFE_ID.sub("_", student))
                        if student else None))
    return entries


def worksheet_groups(worksheet, path):
    """The teams of a Moodle worksheet of team submissions (its rows' Group column; the default
    team's name read in any language), or None when it has no such column (no team submissions) or
    names nobody (blind marking: reveal the identities, or give --groups)."""
    rows = [row for row in worksheet.values() if row.group and (row.name or row.email)]
    if not rows:
        return None
    groups = {}
    for row in rows:
        name = default_team(row.group)
        email = row.email.strip()
        default = f"{_slug(row.name)}_{row.key}" if row.name else f"participant_{row.key}"   # as identify's default_id
        member = Member(row.name or f"Participant {row.key}", (email,) if email else (), name=row.name,
                        names=(_slug(row.name),) if row.name else (), default_id=SAFE_ID.sub("_", default))
        groups.setdefault(_slug(name), Group(name)).members.append(member)
    return Groups(Path(path), "moodle worksheet", groups)


def _roster_student(member, roster):
    """The one roster student `member` names (by id, LMS user id, e-mail or its local part, then by
    name), or None."""
    for key in (k.strip().lower() for k in member.keys if k.strip()):
        hits = [s for s in roster if key in {v for v in (s.lms_user_id.lower(), s.id.lower(), s.email.lower(),
                                                         s.email.split("@")[0].lower() if s.email else "") if v}]
        if len(hits) == 1:
            return hits[0]
    names = {n for n in member.names if n}
    hits = [s for s in roster if names & {_slug(s.first_name + s.last_name), _slug(s.last_name + s.first_name)}]
    return hits[0] if len(hits) == 1 else None


def split_groups(submissions, groups, roster=None):
    """(the submissions that are no group's, one Submission per member of each group that sent one
    (its `student` already the member's id), the members and groups that cannot be graded);
    GroupsError when no file of the download is a group's of FILE, or when FILE names nobody on
    the roster."""
    if roster is not None:
        members = [m for g in groups.groups.values() for m in g.members]
        if members and not any(_roster_student(m, roster) for m in members):
            examples = ", ".join(m.key for m in members[:3])
            raise GroupsError(f"{groups.path}: none of its {len(members)} group members is on the roster (it names "
                              f"e.g. {examples}); a member is matched by roster id, login, LMS user id or e-mail "
                              "(`python -m grader roster show` lists the roster)")
    alone, by_group, not_graded = [], [], []
    matched = set()
    for submission in submissions:
        group = groups.find(submission)
        team_folders = format_of(submission.preset).team_folders
        if group is None and team_folders and submission.login == DEFAULT_TEAM:
            not_graded.append(Submission(DEFAULT_TEAM, submission.path, login=submission.login, name=DEFAULT_TEAM,
                                         preset=submission.preset, status=Status.NOT_ON_ROSTER,
                                         reason=f"Moodle's team of the students in no group sent it: not graded "
                                                f"(name them in {groups.path.name} as group {DEFAULT_TEAM!r})"))
            matched.add(DEFAULT_TEAM)
            continue
        if group is None:
            alone.append(submission)
            continue
        matched.add(group.name)
        if not group.members:
            not_graded.append(Submission(f"group {group.name}", submission.path, login=submission.login,
                                         name=group.name, preset=submission.preset, status=Status.NOT_ON_ROSTER,
                                         reason=f"group {group.name} has no members in {groups.path.name}: not "
                                                "graded (add a row per member)"))
            continue
        for member in group.members:
            found = None if roster is None else _roster_student(member, roster)
            student = member.default_id if roster is None else getattr(found, "id", None)
            if student is None:
                not_graded.append(Submission(f"{member.key} (group {group.name})", submission.path,
                                             login=member.key, name=member.name, preset=submission.preset,
                                             status=Status.NOT_ON_ROSTER,
                                             reason=f"in group {group.name} of {groups.path.name} but not on the "
                                                    "roster: not graded (add them with `python -m grader roster "
                                                    "import`, or correct the groups file)"))
                continue
            email = getattr(found, "email", "") or next((key for key in member.keys if "@" in key), "")
            # a Moodle team's folder number is the group's id: the member's own name comes from the worksheet
            lms_name = "" if team_folders else submission.lms_name
            by_group.append(Submission(student, submission.path, login=submission.login, name=member.name or student,
                                       email=email, lms_name=lms_name, preset=submission.preset,
                                       submitted_at=submission.submitted_at, lms_late=submission.lms_late,
                                       others=list(submission.others), reason=submission.reason,
                                       notes=[f"group {group.name}"] + list(submission.notes), group=group.name))
    if submissions and not matched:
        names = sorted({s.name or s.login for s in submissions})
        raise GroupsError(f"no file of the download is named after a group of {groups.path} (its groups: "
                          f"{_some(g.name for g in groups.groups.values())}; the download names "
                          f"{_some(names)}): is it the group set of this assignment? A download whose files are "
                          "named after each student (Canvas's when group members are graded individually) needs "
                          "no --groups")
    return alone, by_group, not_graded


def _some(names, shown=5):
    names = list(names)
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def join_members(chosen, members, describe):
    """The graded submissions once each group member has theirs: `chosen` (roster-matched
    submissions that are no group's) and `members` (split_groups'). A member who also sent a file
    of their own is graded with the group (the assignment is a group's), their own file named; a
    student in two groups that both sent one keeps the later (by time, else the first group by name)."""
    by_student = {s.student: s for s in chosen}
    for member in sorted(members, key=lambda s: s.group):
        earlier = by_student.get(member.student)
        if earlier is None:
            by_student[member.student] = member
        elif not earlier.group:
            own = earlier.path.name if earlier.path else describe(earlier)
            member.others = member.others + [own]
            member.note(f"also submitted alone ({own}), not graded: graded with group {member.group}")
            by_student[member.student] = member
        elif earlier.group != member.group:
            later, other = (member, earlier) if _when(member) > _when(earlier) else (earlier, member)
            later.note(f"also in group {other.group}, whose submission was not graded for them")
            by_student[member.student] = later
    return sorted(by_student.values(), key=lambda s: s.student)


def _when(submission):
    return submission.submitted_at.timestamp() if submission.submitted_at else float("-inf")
