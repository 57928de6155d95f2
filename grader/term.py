"""The term's decisions that nbgrader's gradebook has no column for, in <grading folder>/term.json:

    penalties   each assignment's late-penalty rule, as autograde was last told it (--late-penalty);
                without one, nbgrader_config.py's plugin. The export applies it to the whole total,
                written-answer points graded later included.
    extensions  a student's own due date for an assignment (`extension ID STUDENT --until DATE` or
                `--days N`), granted before or after grading: a graded submission's lateness and
                penalty are recomputed at once (grader/late_policy.py: reapply), and nbgrader's gradebook
                gets the extension too (its Formgrader shows it).
    lms_extensions  the extensions the LMS's records grant (Moodle's worksheet, "Extension granted
                until: ..."), as autograde last read them: they apply where no extension was given
                here, which always takes precedence.
    excused     students not expected to submit an assignment (`excuse ID STUDENT`): never missing,
                "EX" in the Canvas export (Canvas's own mark for excused), left out of Moodle's.

Kept here rather than only in the gradebook because an extension may be granted before the
student's submission exists, and nbgrader stores an extension on the submission."""
import datetime

from traitlets.config import Config

from . import store
from .submission import Status


class TermError(ValueError):
    """A term operation that cannot be done, with the reason for the instructor."""


def load(course):
    return store.load_term(course)


def _save(course, data):
    store.save_term(course, data)


# ---- the late-penalty rule ----

def remember_penalty(course, assignment_id, config):
    """Keep the rule a run was given (a traitlets Config of the penalty sections) for the export."""
    data = load(course)
    data["penalties"][assignment_id] = {
        section: {key: (f"{value.__module__}.{value.__qualname__}" if isinstance(value, type) else value)
                  for key, value in config[section].items()}
        for section in config if config[section]}
    _save(course, data)


def stored_penalty(course, assignment_id):
    """The rule autograde was last given for `assignment_id` (a traitlets Config), or None."""
    stored = load(course)["penalties"].get(assignment_id)
    return None if stored is None else Config(stored)


# ---- extensions ----

def extension(course, assignment_id, student, due):
    """The student's extension as a timedelta past `due` (the assignment's due date), or None: the
    one given here, else the one the LMS's records grant."""
    data = load(course)
    granted = data["extensions"].get(assignment_id, {}).get(student) or \
        data["lms_extensions"].get(assignment_id, {}).get(student)
    if not granted:
        return None
    if "days" in granted:
        return datetime.timedelta(days=granted["days"])
    if due is None:
        return None
    return max(datetime.timedelta(0), datetime.datetime.fromisoformat(granted["until"]) - due)


def given_here(course, assignment_id, student):
    """The extension given with `extension` ({"days": N} or {"until": ISO time}), or None."""
    return load(course)["extensions"].get(assignment_id, {}).get(student)


def lms_extension(course, assignment_id, student):
    """The student's own due date by the LMS's records (aware), as autograde last read them, or None."""
    granted = load(course)["lms_extensions"].get(assignment_id, {}).get(student)
    return datetime.datetime.fromisoformat(granted["until"]) if granted else None


def remember_lms_extension(course, assignment_id, student, until):
    """Keep the due date the LMS's records grant the student (`until`, aware), or forget it (None:
    the records say there is none)."""
    data = load(course)
    kept = data["lms_extensions"].setdefault(assignment_id, {})
    wanted = {"until": until.isoformat()} if until else None
    if kept.get(student) == wanted:
        return
    if wanted:
        kept[student] = wanted
    else:
        kept.pop(student, None)
    _save(course, data)


def record_extension(course, assignment_id, student, until=None, days=None):
    """Keep the extension (`until`: an aware datetime, the student's own due date; or `days` past
    the assignment's); late_policy.reapply applies it to a stored grade."""
    if (until is None) == (days is None):
        raise TermError("give the extension as --until DATE (the student's own due date) or --days N "
                        "(days past the assignment's due date), one of the two")
    if days is not None and days <= 0:
        raise TermError(f"--days {days:g}: an extension is a positive number of days past the due date "
                        f"(to take one back: `extension {assignment_id} {student} --remove`)")
    _known_student(course, student)
    data = load(course)
    data["extensions"].setdefault(assignment_id, {})[student] = \
        {"days": days} if days is not None else {"until": until.isoformat()}
    _save(course, data)


def remove_extension(course, assignment_id, student):
    data = load(course)
    if student not in data["extensions"].get(assignment_id, {}):
        raise TermError(f"{student} has no extension for {assignment_id}")
    del data["extensions"][assignment_id][student]
    _save(course, data)


# ---- excused ----

def excused(course, assignment_id):
    return set(load(course)["excused"].get(assignment_id, []))


def excuse(course, assignment_id, student, undo=False):
    """Excuse `student` from `assignment_id` (or take the excuse back)."""
    _known_student(course, student)
    data = load(course)
    students = set(data["excused"].get(assignment_id, []))
    if undo and student not in students:
        raise TermError(f"{student} is not excused from {assignment_id}")
    students = students - {student} if undo else students | {student}
    data["excused"][assignment_id] = sorted(students)
    _save(course, data)
    if not undo:    # a 'missing' outcome from an earlier download no longer holds
        store.forget_outcome(course, assignment_id, student, Status.MISSING)


def _known_student(course, student):
    """A student on the roster (or, without one, in the gradebook): a typo is refused, not stored."""
    from .roster import roster_ids
    known = roster_ids(course)
    where = "the roster"
    if known is None:
        with store.gradebook(course.db_url) as gb:
            known = [s.id for s in gb.students]
        where = "the gradebook"
    if student not in known:
        import difflib
        close = difflib.get_close_matches(student, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else \
            (" (it is empty: import a roster or grade first)" if not known else "")
        raise TermError(f"no student {student!r} in {where}{hint}")
