# The instructor's ~/.jupyter/nbgrader_config.py on the hub (installed by users.sh): the course is
# the repository checkout in the instructor's home, configured exactly as `python -m grader` sees it
# (grader/course.py); formgrader, the Course List and `nbgrader ...` all read it. The exchange is
# the hub's shared folder: the spawner sets GRADER_EXCHANGE_ROOT (jupyterhub_config.py).
import os
import sys

COURSE = os.path.expanduser("~/attention-course")
if os.path.isfile(os.path.join(COURSE, "grader", "course.py")):
    sys.path.insert(0, COURSE)
    from grader.course import apply_course_config

    apply_course_config(get_config(), root=COURSE)  # noqa: F821 - provided by traitlets when it loads this file
else:   # a warning, not an error: the instructor's server must still start to fix it
    print(f"nbgrader_config.py: no course checkout at {COURSE}: start the hub with "
          "deploy/jupyterhub/hub.py (it copies the repository there) or clone it there", file=sys.stderr)
