"""The course autograder: nbgrader for the workflow and the gradebook, plus what it lacks —
trusted judging of recorded observations, isolated per-submission grading, hidden-test-free
feedback, a quality gate with a mutation catalogue. See docs/architecture.md."""
import os

from .sandbox import TRITON_WITHOUT_GPU, has_gpu_device

# Triton's interpreter runs the course's kernels (lecture 11, a7) in this process when the machine has no GPU:
# the solution's trace, the quality gate and the catalogues of kernels run here, and Triton must know before
# anything here first imports it (see grader/sandbox.py)
if not has_gpu_device():
    os.environ.setdefault("TRITON_INTERPRET", TRITON_WITHOUT_GPU["TRITON_INTERPRET"])
