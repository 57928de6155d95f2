"""What several test modules share: the system parts some tests need (system.py), waiting for a
condition (waiting.py), Chromium (browser.py), a throwaway JupyterLab (lab.py), the course hub
(hub.py) and a student's notebooks (notebooks.py); and the checkout's course."""
from pathlib import Path

from grader.course import Course

REPO = Path(__file__).resolve().parents[2]
COURSE = Course(REPO)                       # the checkout's course, for parametrizing at collection
ASSIGNMENT_IDS = COURSE.assignment_ids()
