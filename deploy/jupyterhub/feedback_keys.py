"""Put nbgrader's submission keys next to each student's feedback, so that nbgrader's
release_feedback (the Formgrader's "Release Feedback" button) can return it through the exchange.

nbgrader names a student's returned feedback after a hash of their submission's secret, which
`nbgrader collect` stores as course/submitted/<student>/<id>/submission_secret.txt (with
timestamp.txt); release_feedback reads both from course/feedback/<student>/<id>/. nbgrader's own
generate_feedback copies them there; `python -m grader feedback` does not (yet), so release_feedback
stops with "No such file or directory: .../timestamp.txt". Run this in the course folder after
`python -m grader feedback ID` and before releasing the feedback:

    python deploy/jupyterhub/feedback_keys.py a1_self_attention [--course-dir course]

It copies only keys that are missing, so it is harmless once the grader does it itself.
"""
import argparse
import shutil
import sys
from pathlib import Path

KEYS = ("timestamp.txt", "submission_secret.txt")


def copy_keys(assignment_id, course_dir):
    course_dir = Path(course_dir)
    copied, missing = [], []
    for page in sorted((course_dir / "feedback").glob(f"*/{assignment_id}/*.html")):
        student = page.parent.parent.name
        submitted = course_dir / "submitted" / student / assignment_id
        for key in KEYS:
            target = page.parent / key
            if target.exists():
                continue
            if (submitted / key).exists():
                shutil.copy2(submitted / key, target)
                copied.append(f"{student}/{key}")
            else:
                missing.append(f"{student}: no {submitted / key} (not collected with nbgrader collect?)")
    return copied, missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment_id")
    parser.add_argument("--course-dir", default="course", help="the course's grading folder (default: ./course)")
    args = parser.parse_args(argv)
    if not (Path(args.course_dir) / "feedback").is_dir():
        sys.exit(f"feedback_keys: no {Path(args.course_dir) / 'feedback'}: run `python -m grader feedback "
                 f"{args.assignment_id}` in the course folder first")
    copied, missing = copy_keys(args.assignment_id, args.course_dir)
    print(f"feedback_keys: {len(copied)} key files copied" + (f" ({', '.join(copied)})" if copied else ""))
    for line in missing:
        print(f"feedback_keys: {line}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
