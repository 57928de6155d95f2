"""identify: who each submission belongs to.

Without a roster, a student's id is what the download names them by, made stable across
assignments (Canvas: sortable name and user id, never the per-assignment submission id). With a
roster, the LMS's identity must match one roster student: by LMS user id, id, e-mail or its local
part, and for Canvas and Moodle by name when no id matches. A submission from someone not on the
roster is reported and not graded; roster students who sent nothing, now or in an earlier
download of the same assignment, are listed as missing (unless excused: grader/term.py). With
--groups, a file named after a group is graded for each of its members (grader/groups.py); a Moodle
worksheet of team submissions names each team's members itself (its Group column), and each
member's own row gives their participant number (what Moodle's feedback upload matches), their
extension and Moodle's late verdict. Canvas's anonymous names reach the roster through the user id
that the admin's submissions JSON pairs with each anonymous id; names nothing reveals are graded
under the LMS's anonymous id, and a warning says how to reveal them."""
import re

from .. import lms, store, term
from ..groups import join_members, read_groups, split_groups, worksheet_groups
from ..lms import DEFAULT_TEAM, SAFE_ID, default_team, format_of, user_word
from ..roster import load_roster
from ..submission import Status, Submission


def identify(intake, batch):
    """Give every submission of `intake` its student id; the people the roster does not know become
    `intake.strangers`, the roster students with nothing graded `intake.missing`."""
    roster = load_roster(batch.course)
    members = not_graded = []
    groups = read_groups(batch.options.groups) if batch.options.groups else \
        worksheet_groups(intake.worksheet, batch.options.worksheet) if format_of(intake.preset).team_folders else None
    if groups is not None:
        intake.submissions, members, not_graded = split_groups(intake.submissions, groups, roster)
    intake.submissions, intake.strangers, missing = match_roster(intake.submissions, roster)
    if groups is not None:
        intake.submissions = join_members(intake.submissions, members, describe)
        intake.strangers += not_graded
        graded = {s.student for s in intake.submissions}
        missing = [s for s in missing if s.id not in graded]
    if intake.worksheet:
        by_id = {s.id: s for s in roster or []}
        for submission in intake.submissions:
            if format_of(submission.preset).team_folders and submission.group:
                _member_row(submission, intake.worksheet, by_id.get(submission.student))
    intake.warnings += _anonymous_warnings(intake.submissions, roster)
    graded_before = _students_with_submissions(batch.course_db, batch.assignment_id) if missing else set()
    excused = term.excused(batch.course, batch.assignment_id) if missing else set()
    intake.missing = [Submission(s.id, status=Status.MISSING, reason=f"{s.display}: no submission")
                      for s in missing if s.id not in graded_before and s.id not in excused]
    return intake


def _slug(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def default_id(submission):
    """The id of a student when there is no roster (or the LMS hides who it is)."""
    own = format_of(submission.preset).default_id
    return own(submission) if own else SAFE_ID.sub("_", submission.lms_user_id or submission.login)


def anonymous(submission):
    """The LMS hides who this is (Canvas anonymous grading: anon_<id>, unless its records paired it
    with the user id; Moodle blind marking: Participant_<n>, its records not saying more)."""
    hides = format_of(submission.preset).anonymous
    return bool(hides and hides(submission))


def _anonymous_warnings(submissions, roster):
    """What to do about submissions graded under the LMS's anonymous ids."""
    hidden = [s for s in submissions if anonymous(s)]
    reach = ("they reach no roster student, so no export, Canvas gradebook or feedback zip carries them, and nobody "
             "is called missing" if roster is not None else "their ids match no other assignment's")
    warnings = []
    for name, lms_format in lms.FORMATS.items():
        logins = [s.login for s in hidden if s.preset == name]
        if logins and lms_format.anonymous_advice:
            warnings.append(lms_format.anonymous_advice(logins, reach))
    return warnings


def _member_row(member, worksheet, student=None):
    """A Moodle team member's own row of the worksheet (by e-mail, else by name, among their team's
    rows): their participant number names their feedback as Moodle's upload reads it (it gives each
    file to the one participant its name carries: mod/assign/feedback/file/importziplib.php), their
    extension and Moodle's late verdict are their own."""
    team = _slug(default_team(member.group))
    rows = [r for r in worksheet.values() if _slug(default_team(r.group)) == team] or list(worksheet.values())
    emails = {e.strip().lower() for e in (member.email, student.email if student else "") if e}
    hits = [r for r in rows if r.email and r.email.strip().lower() in emails]
    if not hits:
        names = {_slug(member.name)} | ({_slug(student.first_name + student.last_name)} if student else set())
        hits = [r for r in rows if r.name and _slug(r.name) in names - {""}]
    if len(hits) != 1:
        member.note("no row of the worksheet is theirs alone: their feedback is left out of Moodle's zip")
        return
    row = hits[0]
    member.lms_name = f"{moodle_prefix(row.name)}_{row.key}_assignsubmission_file"
    member.submitted_at = row.submitted_at or member.submitted_at
    if row.late is not None:
        member.lms_late = row.late
    member.lms_records_read, member.lms_extension = True, row.extension


def moodle_prefix(name):
    """A participant's name as Moodle's download writes it before the number (its _ made spaces,
    characters a file name cannot hold dropped: mod/assign/classes/downloader.php)."""
    return re.sub(r"\s+", " ", re.sub(r'[_/\\:*?"<>|]', " ", name)).strip() or "Participant"


def _candidates(submission, roster):
    login = (submission.lms_user_id or submission.login).strip().lower()
    lms_format = format_of(submission.preset)
    # Moodle's number is the assignment's own participant id, never a user id or roster id
    keys = [] if not lms_format.login_is_user else [
        lambda s: s.lms_user_id, lambda s: s.id, lambda s: s.email, lambda s: s.email.split("@")[0] if s.email else ""]
    for key in keys:
        hits = [s for s in roster if key(s) and key(s).strip().lower() == login]
        if hits:
            return hits
    if submission.email:                                          # from the LMS's records
        hits = [s for s in roster if s.email and s.email.strip().lower() == submission.email.strip().lower()]
        if hits:
            return hits
    if lms_format.roster_name and submission.name:    # as the LMS writes it: Canvas "doejane", Moodle "Jane Doe"
        return [s for s in roster if _slug(lms_format.roster_name(s)) == _slug(submission.name)]
    return []


def describe(submission):
    """How the download names someone, for messages: 'doejane (Canvas user 123)'."""
    who = user_word(submission.preset)
    name = f"{submission.name} " if submission.name and submission.name != submission.login else ""
    if submission.lms_user_id:
        return f"{name}({who} {submission.lms_user_id}, anonymous as {submission.login})"
    return f"{name}({who} {submission.login})"


def match_roster(submissions, roster=None):
    """(submissions with their roster ids, strangers, roster students without a submission here).
    Without a roster (None) everyone who submitted is a student, under default_id."""
    if roster is None:
        for submission in submissions:
            submission.student = default_id(submission)
        return submissions, [], []
    chosen, strangers = {}, []
    for submission in submissions:
        if anonymous(submission):     # graded under the LMS's anonymous id; the roster cannot know it
            submission.student = default_id(submission)
            submission.note("anonymous in the LMS: graded as " + submission.student)
            chosen[submission.student] = submission
            continue
        hits = _candidates(submission, roster)
        if not hits or len(hits) > 1:
            why = ("not graded (add them to the roster with `python -m grader roster import`, then grade again)"
                   if not hits else f"matches several roster students ({', '.join(s.id for s in hits)}): "
                   "not graded (give each an lms_user_id in the roster)")
            team_folders = format_of(submission.preset).team_folders
            if not hits and team_folders and submission.login == DEFAULT_TEAM:
                why = ("Moodle's team of the students in no group sent it: not graded (name them with --groups "
                       f"FILE, as group {DEFAULT_TEAM!r})")
            elif not hits and team_folders:
                why += "; if it is a team's folder, name the team's members with --groups FILE"
            strangers.append(Submission(describe(submission), submission.path, login=submission.login,
                                        name=submission.name, preset=submission.preset,
                                        status=Status.NOT_ON_ROSTER, reason=why))
            continue
        submission.student = hits[0].id
        if submission.student in chosen:        # two logins of one student: the later counts
            earlier = chosen[submission.student]
            later, other = sorted((earlier, submission), key=_when)[::-1]
            later.others = later.others + [other.path.name if other.path else describe(other)]
            later.note(f"also submitted as {describe(other)}, not graded")
            chosen[submission.student] = later
        else:
            chosen[submission.student] = submission
    # under anonymous grading nobody can tell who of the roster has not submitted
    missing = [] if any(anonymous(s) for s in chosen.values()) else [s for s in roster if s.id not in chosen]
    return sorted(chosen.values(), key=lambda s: s.student), strangers, missing


def _when(submission):
    return submission.submitted_at.timestamp() if submission.submitted_at else float("-inf")


def _students_with_submissions(db_url, assignment_id):
    """Students the gradebook already holds a submission of (a re-grade of one student's folder
    does not make the rest of the class missing)."""
    return store.students_with_submissions(db_url, assignment_id)
