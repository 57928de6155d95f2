"""Canvas: {sortablename}_[LATE_]{userid}_{attachmentid}_{original name}[-N].ext, flat.

    [LATE_]anon_{anonymousid}_{attachmentid}_{original name}  (anonymous grading)
    {group name}_[LATE_]{userid}_{attachmentid}_{original name}  (a group assignment: one file per
    group, the name part the group's, the user id one member's)
LATE_ when Canvas counted it late; -1, -2 ... when the same name was uploaded again (canvas-lms
lib/content_zipper.rb, Assignment#representatives). Its feedback zip ("Re-Upload Submissions")
takes the first two all-digit `_` parts of a name as the user id and the id of a file in their
submission (canvas-lms Assignment#infer_comment_context_from_filename), so an anonymous submission's
page carries the user id its records paired with the anonymous id."""
import re

from .base import Found, LmsFormat, unaddressed

# the name part keeps letters, digits and underscores (Canvas drops the rest and every "_<digits>_")
NAME = re.compile(r"(?:(?P<name>[^/]+?)_)??(?P<late>late_)?(?P<uid>\d+|anon_[A-Za-z0-9]+)_(?P<sid>\d+)_"
                     r"(?P<orig>.+?)(?:-(?P<rev>\d+))?(?P<ext>\.[A-Za-z0-9]+)?", re.IGNORECASE)


def read_name(relative, path, assignment_id, zone=None):
    match = NAME.fullmatch(relative.name)
    if len(relative.parts) != 1 or not match:
        return None
    return Found(path, login=match["uid"], name=match["name"] or "", lms_late=bool(match["late"]),
                 revision=int(match["rev"] or 0), preset="canvas")


def feedback_name(outcome, assignment_id):
    match = NAME.fullmatch(outcome.get("lms_name", ""))
    uid = outcome.get("lms_user_id") or (match["uid"] if match else "")
    if match is None or uid.startswith("anon_"):
        return None, unaddressed(outcome, "canvas", anonymous=uid.startswith("anon_"))
    return f"{match['name'] or 'student'}_{uid}_{match['sid']}_{assignment_id}-feedback.html", None


FORMAT = LmsFormat("canvas", user="Canvas user", read_name=read_name, feedback_name=feedback_name,
                   grades_export=True)
