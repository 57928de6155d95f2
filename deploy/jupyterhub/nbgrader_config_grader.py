# A course's grader account's ~/.jupyter/nbgrader_config.py on the hub (installed by users.sh): the
# course is the repository checkout ~/<course id> in that account's home (hub.py copies it there),
# configured exactly as `python -m grader` sees it (grader/course.py); the course's Formgrader
# service, its Course List and `nbgrader ...` all read it. The hub sets GRADER_COURSE_ID and the
# exchange (GRADER_EXCHANGE_ROOT) in the service's environment (jupyterhub_config.py).
import os
import sys

COURSE = os.path.expanduser("~/" + (os.environ.get("GRADER_COURSE_ID", "").strip() or "attention-course"))
if os.path.isfile(os.path.join(COURSE, "grader", "course.py")):
    sys.path.insert(0, COURSE)
    from grader.course import apply_course_config

    apply_course_config(get_config(), root=COURSE)  # noqa: F821 - provided by traitlets when it loads this file
else:   # a warning, not an error: the service must still start to fix it
    print(f"nbgrader_config.py: no course checkout at {COURSE}: start the hub with "
          "deploy/jupyterhub/hub.py (it copies the repository there) or clone it there", file=sys.stderr)
