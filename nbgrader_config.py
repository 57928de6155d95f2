# nbgrader configuration for this course: the same settings `python -m grader` uses
# (defined once, in grader/course.py: Course.nbgrader_config), so `nbgrader ...` and formgrader see the same course.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grader.course import apply_course_config

c = get_config()  # noqa: F821 - provided by traitlets when it loads this file
# the course's folders and gradebook, and one grading path: `nbgrader autograde` and the Formgrader's
# autograde button run the course's sandboxed pipeline (grader/nbgrader_autograde.py), not nbgrader's
apply_course_config(c, root=os.path.dirname(os.path.abspath(__file__)))
# the course folder is not in git: create it (and the exchange) so formgrader can open the gradebook
os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "course", "exchange"), exist_ok=True)
