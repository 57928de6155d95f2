"""What became of a submission: the one vocabulary the stages, the saved outcomes (grader/store.py)
and every table share."""
import enum


class Status(enum.StrEnum):
    """What became of a submission. Only GRADED and NOT_GRADED reach the gradebook."""
    PENDING = "pending"                        # in the pipeline
    GRADED = "graded"
    NOT_GRADED = "not graded"                  # could not be graded: the reason says why
    MISSING = "missing"                        # a roster student with nothing in the download
    NOT_ON_ROSTER = "not on the roster"        # someone the roster does not know: not graded
    UNRECOGNISED = "unrecognised file"         # a file whose name the LMS preset could not read
    EXCUSED = "excused"                        # not expected to submit (`excuse`): in exports only
