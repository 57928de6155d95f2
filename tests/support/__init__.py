"""What several test modules share: the system parts some tests need (system.py), waiting for a
condition (waiting.py), Chromium (browser.py), a throwaway JupyterLab (lab.py), the course hub
(hub.py), a student's notebooks (notebooks.py) and a test class for each item (spread.py); and the
checkout's course."""
from pathlib import Path

from grader.course import Course

REPO = Path(__file__).resolve().parents[2]
COURSE = Course(REPO)                       # the checkout's course, for parametrizing at collection
LAB_IDS = [aid for aid in COURSE.assignment_ids() if aid.startswith("debug_")]   # debugging labs (grader/labs.py)
ASSIGNMENT_IDS = [aid for aid in COURSE.assignment_ids() if aid not in LAB_IDS]
