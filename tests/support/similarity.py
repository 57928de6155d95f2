"""Graded submissions for the similarity check (grader/similarity.py) without grading them: each
notebook written where autograde leaves a graded one (FOLDER/autograded/<student>/<id>/<id>.ipynb),
with a graded outcome (FOLDER/outcomes/<id>.json), as the check reads them."""
import json

import nbformat


def write_graded(course, assignment_id, notebooks, groups=None, outcomes=None):
    """`notebooks`: {student: notebook}; `groups`: {group name: [members]}, each member graded with
    the group's notebook (the first member's entry in `notebooks`, as autograde copies one file to
    every member); `outcomes`: {student: outcome} written as they are (a not-graded one, say)."""
    saved = {}
    members = {member: (name, people[0]) for name, people in (groups or {}).items() for member in people}
    for student in sorted(set(notebooks) | set(members)):
        group, first = members.get(student, ("", student))
        folder = course.grading_dir / "autograded" / student / assignment_id
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebooks[first], str(folder / f"{assignment_id}.ipynb"))
        saved[student] = {"student": student, "status": "graded", "score": 0.0, "failed": [], "reason": "",
                          "group": group}
    saved.update(outcomes or {})
    path = course.grading_dir / "outcomes" / f"{assignment_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(saved, indent=1, sort_keys=True))
    return course
