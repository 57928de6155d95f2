# nbgrader's configuration for every user of the hub's environment (installed by install.sh as
# <hub env>/etc/jupyter/nbgrader_config.py): the course id and the shared exchange, so the
# students' Assignments tab fetches from and submits to the instructor's course. The instructor's
# ~/.jupyter/nbgrader_config.py (users.sh) adds the course's own settings on top.
import os

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
c.CourseDirectory.course_id = "attention-course"     # grader/course.py COURSE_ID
c.Exchange.root = os.environ.get("GRADER_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
