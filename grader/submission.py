"""What the pipeline passes along: one `Submission` record per submission (and the batch's
`Intake`), the `Options` of a run, and the `Status` a submission ends in (its values: grader/status.py;
grader/pipeline.py runs the stages)."""
import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path

from .course import CELL_TIMEOUT_S
from .status import Status
from .times import time_zone

# who a submission is in its own temporary gradebook (the merge stage files it under the real student)
TEMPLATE_STUDENT = "submission"


class Kernels(enum.StrEnum):
    WARM = "warm"    # each kernel a fresh fork of a server that imported torch once (sandbox.WarmKernels)
    COLD = "cold"    # each kernel started from scratch in bubblewrap


class Engine(enum.StrEnum):
    THREADS = "threads"   # this machine, `workers` submissions at once
    DASK = "dask"         # Dask distributed: a local cluster, or the one at `scheduler`


@dataclass(frozen=True)
class Options:
    """How a run grades: everything the command line can set, in one place."""
    sandboxed: bool = True
    kernels: Kernels = Kernels.WARM
    engine: Engine = Engine.THREADS
    scheduler: str | None = None         # a Dask scheduler's address (engine dask)
    workers: int | None = None           # submissions graded at once (default: grader/cpus.py, the usable CPUs)
    cell_timeout: int = CELL_TIMEOUT_S   # seconds per cell
    total_timeout: int | None = None     # seconds per notebook (default: see stages/execute.py)
    lms: str = "auto"                    # how the download names its files (grader/lms/)
    pattern: str | None = None           # a regular expression instead of a preset
    times: object = None                 # Canvas's submissions JSON (a file, or a tuple of its pages) or a CSV
                                         # of times (grader/lms/records.py)
    worksheet: str | None = None         # Moodle's grading worksheet: times and who each participant is
    lms_timezone: str | None = None      # the LMS's zone, for its times without an offset
    groups: str | None = None            # who is in each group: one file graded for every member (grader/groups.py)
    due: object = None                   # an aware datetime: the assignment's due date
    late_penalty: object = None          # a traitlets Config (grader/late_policy.py); None: the course's
    student: str | None = None           # grade only this student's submission (a regrade of one)
    submitted_at: object = None          # when SOURCE is one notebook: when it came (aware), else unknown
    progress: bool = True                # a progress bar while grading

    def __post_init__(self):
        for name, kind in (("kernels", Kernels), ("engine", Engine)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                raise ValueError(f"{name} must be one of {', '.join(kind)}, not {value!r}") from None
        if self.scheduler and self.engine is not Engine.DASK:
            object.__setattr__(self, "engine", Engine.DASK)
        if self.lms_timezone:
            time_zone(self.lms_timezone)        # ValueError naming an unknown zone
        for name in ("workers", "cell_timeout", "total_timeout"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name.replace('_', '-')} must be at least 1, not {value}")

    @property
    def parallel(self):
        """How many submissions are graded at once: --workers, else the CPUs this process may use (its
        cgroup's quota in a container, not the host's core count: grader/cpus.py)."""
        from .cpus import available_cpus
        return max(1, self.workers or available_cpus())


@dataclass
class Submission:
    """One submission's record, from the download to the gradebook. collect and identify fill in
    who and when; the GRADE stages what the notebook is worth; the RECORD stages what the gradebook
    then says (the late penalty)."""
    student: str                               # the id it is graded under (a roster id after identify)
    path: Path | None = None                   # the notebook to grade; None when there is none
    # what the download says
    login: str = ""                            # who the LMS says sent it (user id, username)
    name: str = ""                             # the LMS's readable name for them, when it gives one
    email: str = ""                            # their e-mail address, when the LMS's records give it
    lms_name: str = ""                         # the graded file's name in the download (its first path part):
                                               # what the LMS matches returned feedback by
    preset: str = ""                           # the naming it was read with (grader/lms/)
    submitted_at: object = None                # aware UTC datetime, when the download says
    lms_late: bool | None = None               # the LMS's own late flag (Canvas, Moodle's worksheet)
    lms_user_id: str = ""                      # the LMS's user id behind an anonymous name (Canvas's anon_<id>),
                                               # from its records: what the roster and its feedback upload match
    lms_extension: object = None               # the student's own due date granted in the LMS (aware; Moodle's
                                               # worksheet), when its records were read (lms_records_read)
    lms_records_read: bool = False             # the LMS's records had a row for them: no lms_extension means none
    others: list = field(default_factory=list)   # their other files, not graded
    group: str = ""                            # the group whose file this is, graded for each member
    # how it went
    status: Status = Status.PENDING
    reason: str = ""                           # why it was not graded (or not on the roster, ...)
    notes: list = field(default_factory=list)  # what the instructor should know (a renamed file, ...)
    seconds: float = 0.0
    # what the GRADE stages make (kept on the grading machine; not in the outcomes file)
    notebook: object = field(default=None, repr=False)    # the sanitized notebook
    workdir: Path | None = field(default=None, repr=False)  # its working folder, with its own gradebook
    execution: object = field(default=None, repr=False)   # stages.execute.Execution
    verdicts: list = field(default_factory=list, repr=False)  # judging.CellVerdict, per test cell
    autograded: Path | None = field(default=None, repr=False)  # the graded notebook nbgrader saw
    # the result
    score: float = 0.0
    max_score: float = 0.0
    failed: list = field(default_factory=list)   # grade ids of failed test cells
    late: bool | None = None                   # None: unknown (no due date or no submission time)
    time_unknown: bool = False                 # a due date, but nothing says when it was submitted
    seconds_late: float | None = None
    penalty: float = 0.0                       # points taken by the late-submission penalty

    @property
    def db_url(self):
        """This submission's own gradebook (a copy of the batch's template), while it is graded."""
        return f"sqlite:///{self.workdir / 'gradebook.db'}"

    @property
    def label(self):
        if self.status == Status.GRADED:
            return "graded" + (" (" + "; ".join(self.notes) + ")" if self.notes else "")
        if self.status == Status.NOT_GRADED:
            return f"not graded: {self.reason}"
        return f"{self.status}: {self.reason}" if self.reason else str(self.status)

    @property
    def late_label(self):
        if self.late and self.time_unknown:
            return "late (the LMS says), time unknown"
        if self.time_unknown:
            return "time unknown"
        if not self.late:
            return "-" if self.late is None else "on time"
        when = f" {_duration(self.seconds_late)}" if self.seconds_late else ""
        return f"late{when}" + (f", -{self.penalty:g}" if self.penalty else "")

    def note(self, text):
        if text:
            self.notes.append(text)

    def summary(self):
        """What the class report keeps of it (course/outcomes/<id>.json): plain data only."""
        keep = ("student", "status", "reason", "score", "max_score", "failed", "notes", "seconds",
                "late", "seconds_late", "penalty", "time_unknown", "login", "preset", "lms_name", "group",
                "lms_user_id", "lms_records_read")
        data = {name: getattr(self, name) for name in keep}
        data["status"] = str(self.status)
        data["submitted_at"] = self.submitted_at.isoformat() if self.submitted_at else None
        data["label"] = self.label
        return data

    def lightened(self):
        """The record without what only the grading machine needs (a Dask result travels light)."""
        return dataclasses.replace(self, notebook=None, execution=None, verdicts=[])


@dataclass
class Intake:
    """What the intake stages make of a download: the submissions to grade, and the people and
    files that will not be graded (each a Submission with its status and reason)."""
    source: Path
    preset: str = ""
    submissions: list = field(default_factory=list)
    unrecognised: list = field(default_factory=list)   # Submission(status=UNRECOGNISED)
    strangers: list = field(default_factory=list)      # Submission(status=NOT_ON_ROSTER)
    missing: list = field(default_factory=list)        # Submission(status=MISSING)
    worksheet: dict = field(default_factory=dict)      # Moodle's worksheet: participant number -> LmsRecord
    warnings: list = field(default_factory=list)       # what the instructor must know before trusting the run:
                                                       # records that cover part of the download, anonymous names

    @property
    def not_graded(self):
        return self.missing + self.strangers + self.unrecognised


class NotGraded(Exception):
    """Raised by a GRADE stage: this submission cannot be graded, for the reason given."""


def _duration(seconds):
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
