"""Stage 2: who each submission belongs to.

Without a roster, a student's id is what the download names them by, made stable across
assignments (Canvas: sortable name and user id, never the per-assignment submission id). With a
roster, the LMS's identity must match one roster student: by LMS user id, id, e-mail or its local
part, and for Canvas and Moodle by name when no id matches. A submission from someone not on the
roster is reported and not graded; roster students who sent nothing are listed as missing."""
import re
from dataclasses import dataclass, field

from .lms_names import SAFE_ID


@dataclass
class Stranger:
    """A submission no roster student could be found for."""
    submission: object
    reason: str


@dataclass
class Identified:
    submissions: list                               # to grade, student = roster id
    strangers: list = field(default_factory=list)   # Stranger, for people not on the roster
    missing: list = field(default_factory=list)     # roster students without a submission


def _slug(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def default_id(submission):
    """The id of a student when there is no roster."""
    if submission.preset in ("canvas", "moodle") and submission.name:
        return SAFE_ID.sub("_", f"{_slug(submission.name)}_{submission.login}")
    return SAFE_ID.sub("_", submission.login)


def _candidates(submission, roster):
    login = submission.login.strip().lower()
    for key in (lambda s: s.lms_user_id, lambda s: s.id, lambda s: s.email,
                lambda s: s.email.split("@")[0] if s.email else ""):
        hits = [s for s in roster if key(s) and key(s).strip().lower() == login]
        if hits:
            return hits
    if submission.preset == "canvas" and submission.name:        # sortable name: "doejane"
        return [s for s in roster if _slug(s.last_name + s.first_name) == _slug(submission.name)]
    if submission.preset == "moodle" and submission.name:        # full name: "Jane Doe"
        return [s for s in roster if _slug(s.first_name + s.last_name) == _slug(submission.name)]
    return []


def describe(submission):
    """How the download names someone, for messages: 'doejane (Canvas user 123)'."""
    what = {"canvas": "Canvas user", "moodle": "Moodle participant", "blackboard": "Blackboard user"}
    who = what.get(submission.preset, "login")
    name = f"{submission.name} " if submission.name and submission.name != submission.login else ""
    return f"{name}({who} {submission.login})"


def identify(submissions, roster=None):
    if roster is None:
        for submission in submissions:
            submission.student = default_id(submission)
        return Identified(submissions)
    chosen, strangers = {}, []
    for submission in submissions:
        hits = _candidates(submission, roster)
        if not hits:
            strangers.append(Stranger(submission, "not graded (add them to the roster with `python -m grader roster "
                                          "import`, then grade again)"))
            continue
        if len(hits) > 1:
            strangers.append(Stranger(submission, f"matches several roster students ({', '.join(s.id for s in hits)}): "
                                          "not graded (give each an lms_user_id in the roster)"))
            continue
        submission.student = hits[0].id
        if submission.student in chosen:        # two logins of one student: the later counts
            earlier = chosen[submission.student]
            later, other = sorted((earlier, submission), key=_when)[::-1]
            later.others = later.others + [other.path.name if other.path else describe(other)]
            later.note = "; ".join(filter(None, [later.note, f"also submitted as {describe(other)}, not graded"]))
            chosen[submission.student] = later
        else:
            chosen[submission.student] = submission
    missing = [s for s in roster if s.id not in chosen]
    return Identified(sorted(chosen.values(), key=lambda s: s.student), strangers, missing)


def _when(submission):
    return submission.submitted_at.timestamp() if submission.submitted_at else float("-inf")
