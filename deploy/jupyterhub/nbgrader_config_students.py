# nbgrader's configuration for every user of the hub's environment (installed by install.sh as
# <hub env>/etc/jupyter/nbgrader_config.py): the course id and the shared exchange, so the
# students' Assignments tab fetches from and submits to their own course. The hub sets
# GRADER_COURSE_ID in each user's server from deploy/jupyterhub/users.txt (several courses on one
# hub); without it, the course's default id, as in grader/course.py (course_id).
import os

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.CourseDirectory.course_id = os.environ.get("GRADER_COURSE_ID", "").strip() or "attention-course"
c.Exchange.root = os.environ.get("GRADER_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
