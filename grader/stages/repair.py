"""repair: in a debugging lab, a bug's tests pay only for a repair of the colleague's code.

For each planted bug, the student's definition of its name is measured against the planted one
(grader/labs.py, judge_repairs): a definition rewritten, replaced or missing fails the bug's test
cells, whatever the judge found, with the reason as the cell's message; the feedback and the class
report name it. Any other assignment passes through unchanged. Runs in the trusted grader process,
on the sanitized notebook's source: nothing the student's kernel reports takes part."""
from .. import labs


def repair(submission, batch):
    """`submission.verdicts`, with each bug that was not repaired failing its tests."""
    lab = labs.bugs_if_lab(batch.course, batch.assignment_id)
    if lab is None:
        return submission
    bugs, given = lab
    submission.verdicts = labs.with_repairs(submission.verdicts, labs.judge_repairs(bugs, submission.notebook, given))
    return submission
