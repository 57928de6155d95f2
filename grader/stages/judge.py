"""judge: the verdict on each test cell (grader/judging.py): what the submission's kernel recorded
at each check site, paired with what the reference solution's trace expects there, and the
forbidden calls in the student's own code. Runs only in the trusted grader process."""
from ..judging import judge_notebook, student_code_findings


def judge(submission, batch):
    """`submission.verdicts`, one per test cell of the assignment, in order."""
    submission.verdicts = judge_notebook(batch.trace, submission.execution.records,
                                         student_code_findings(submission.notebook, batch.released_tests))
    return submission
