"""The course autograder: nbgrader for the workflow and the gradebook, plus what it lacks —
trusted judging of recorded observations, isolated per-submission grading, hidden-test-free
feedback, a quality gate with a mutation catalogue. See docs/architecture.md."""
