"""Moodle: {Full Name}_{participantid}_assignsubmission_file[_]/[{folders}/]{original name}.

    Participant_{participantid}_assignsubmission_file[_]/...  (blind marking)
    {Group name}_{groupid}_assignsubmission_file/...  (team submissions; the group's name with _
    made a space; "Default group_assignsubmission_file" for who is in none)
One folder per participant or team, trailing _ before Moodle 4.1, the student's own folders kept
below it; or the same prefix on flat names; the participant id is the assignment's own mapping id,
not the user id (mod/assign/classes/downloader.php). Its feedback zip ("Upload multiple feedback
files in a zip") reads <name>_<participant id>_<plugin type>_<plugin name>_... and gives the file to
that one participant (mod/assign/feedback/file/importziplib.php), so a team member's page carries
their own participant number, never the team folder's group id."""
import re

from .base import Found, LmsFormat, unaddressed

NAME = re.compile(r"(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?:file|onlinetext)_?(?P<orig>.*)")
# team submissions of students in no group: mod_assign's string 'defaultteam', with no group id, in
# the downloading user's language (mod/assign/lang/{en,de,fr,es}/assign.php); read as DEFAULT_TEAM
DEFAULT_TEAM = "Default group"
DEFAULT_TEAM_NAMES = (DEFAULT_TEAM, "Standard-Gruppe", "Groupe par défaut", "Grupo por defecto")
DEFAULT_TEAM_FOLDER = re.compile("(?:" + "|".join(map(re.escape, DEFAULT_TEAM_NAMES))
                                  + r")_assignsubmission_(?:file|onlinetext)_?", re.IGNORECASE)


def default_team(name):
    """DEFAULT_TEAM for Moodle's name of the team of students in no group, in any language read; else
    `name` as it is."""
    return DEFAULT_TEAM if name.strip().lower() in (n.lower() for n in DEFAULT_TEAM_NAMES) else name


def read_name(relative, path, assignment_id, zone=None):
    if len(relative.parts) >= 2:        # one folder per participant (or team), the student's own folders below
        match = NAME.fullmatch(relative.parts[0])
        if not match and DEFAULT_TEAM_FOLDER.fullmatch(relative.parts[0]):
            return Found(path, login=DEFAULT_TEAM, name=DEFAULT_TEAM, preset="moodle",
                         inside="/".join(relative.parts[1:-1]))
    elif len(relative.parts) == 1:      # older Moodles: flat names with the same prefix
        match = NAME.fullmatch(relative.name)
        match = match if match and match["orig"] else None
    else:
        match = None
    if not match:
        return None
    return Found(path, login=match["uid"], name=match["name"], preset="moodle", inside="/".join(relative.parts[1:-1]))


def feedback_name(outcome, assignment_id):
    match = NAME.fullmatch(outcome.get("lms_name", ""))
    uid = outcome.get("lms_user_id") or (match["uid"] if match else "")
    if outcome.get("group") and not (match and outcome.get("lms_records_read")):
        return None, (f"team {outcome['group']}: Moodle gives a file to the participant its name carries, and no "
                      "row of the grading worksheet gave theirs; grade with --worksheet")
    if match is None or uid.startswith("anon_"):
        return None, unaddressed(outcome, "moodle", anonymous=uid.startswith("anon_"))
    return f"{match['name']}_{match['uid']}_assignsubmission_file_{assignment_id}-feedback.html", None


FORMAT = LmsFormat("moodle", user="Moodle participant", read_name=read_name, feedback_name=feedback_name,
                   grades_export=True)
