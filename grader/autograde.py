"""`autograde ID SOURCE`: grade every submission in isolation, then merge.

Collect (the LMS download's names) -> identify (the roster) -> for each submission, in parallel:
sanitize -> execute (sandboxed kernel) -> judge -> score -> then, one at a time: merge into the
course gradebook with the submission time and nbgrader's late penalty.

Each submission gets its own working copy (only its notebook), its own kernel and its own
temporary gradebook (a copy of a template made from solutions/); only the merge stage touches
the course gradebook. A broken submission becomes an outcome in the table, never a crash.
"""
import json
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from .batch import GRADED, MISSING, NOT_ON_ROSTER, UNRECOGNISED, Batch, Outcome
from .course import COURSE_DIR
from .engine import grade_with_dask
from .stages.collect import collect
from .stages.identify import describe, identify


def autograde(assignment_id, source, course_dir=COURSE_DIR, progress=True, workers=None, sandboxed=True,
              engine="threads", scheduler=None, lms="auto", pattern=None, due=None, late_penalty=None,
              kernels="warm", **timeouts):
    """Grade every submission found in `source` (an LMS download, nbgrader's layout, a folder);
    `workers` submissions at a time (default: the core count). Each worker thread drives one
    kernel in its own sandbox; merges happen here, one at a time, as results arrive. `due`: an
    aware datetime to store as the assignment's due date; `late_penalty`: a Config from
    stages.late.penalty_config (default: the course's nbgrader_config.py). `kernels`: "warm" starts
    each sandboxed kernel from a fork server that has imported torch once (sandbox.WarmKernels; used
    for two submissions or more, on the threads engine), "cold" starts each in bubblewrap from scratch."""
    from .roster import load_roster
    intake = collect(assignment_id, source, lms=lms, pattern=pattern)
    identified = identify(intake.submissions, load_roster(course_dir))
    submissions = identified.submissions
    if kernels not in ("warm", "cold"):
        raise ValueError(f"kernels must be 'warm' or 'cold', not {kernels!r}")
    warm = kernels == "warm" and engine == "threads" and len(submissions) > 1
    batch = Batch(assignment_id, course_dir=course_dir, sandboxed=sandboxed, due=due, late_penalty=late_penalty,
                  warm=warm, **timeouts)
    workers = max(1, workers or os.cpu_count() or 1)
    outcomes = []
    try:
        with tqdm(total=len(submissions), desc=f"grading {assignment_id}", unit="student",
                  disable=not progress) as bar:
            if engine == "dask":
                outcomes = grade_with_dask(batch, submissions, scheduler=scheduler, workers=workers, progress=bar)
            else:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    futures = [pool.submit(batch.grade, submission) for submission in submissions]
                    for future in as_completed(futures):
                        outcome, pending = future.result()
                        batch.merge(outcome, pending)
                        outcomes.append(outcome)
                        bar.update(1)
    finally:
        batch.close()
    _keep_nbgrader_keys(assignment_id, submissions, Path(course_dir))
    # a roster student is missing only if nothing of theirs was ever graded for this assignment: a
    # re-grade of one student's folder does not make the rest of the class "missing"
    submitted = _students_with_submissions(batch.course_db, assignment_id)
    identified.missing = [s for s in identified.missing if s.id not in submitted]
    outcomes += _unmerged_outcomes(intake, identified, batch.max_score)
    save_outcomes(assignment_id, outcomes, course_dir)
    return sorted(outcomes, key=lambda o: (o.status in (NOT_ON_ROSTER, UNRECOGNISED), o.student))


def _unmerged_outcomes(intake, identified, max_score):
    """What the gradebook does not get: roster students who sent nothing, people not on the
    roster, files whose names the chosen LMS preset could not read."""
    outcomes = [Outcome(s.id, MISSING, reason=f"{s.display}: no submission", max_score=max_score)
                for s in identified.missing]
    outcomes += [Outcome(describe(s.submission), NOT_ON_ROSTER, reason=s.reason, max_score=max_score)
                 for s in identified.strangers]
    outcomes += [Outcome(path, UNRECOGNISED, max_score=max_score,
                         reason=f"not read as a {intake.preset} file name (use --lms or --pattern)")
                 for path in intake.unrecognised]
    return outcomes


def _keep_nbgrader_keys(assignment_id, submissions, course_dir):
    """nbgrader's timestamp.txt and submission_secret.txt go beside the autograded notebook, as
    nbgrader's own autograde puts them: generate_feedback copies them on into feedback/, where
    release_feedback (the Formgrader's button) needs them to return the feedback via the exchange."""
    import shutil

    from .stages.lms_names import NBGRADER_KEYS
    for submission in submissions:
        graded = course_dir / "autograded" / submission.student / assignment_id
        if submission.preset != "nbgrader" or submission.path is None or not graded.is_dir():
            continue
        for key in NBGRADER_KEYS:
            if (submission.path.parent / key).is_file():
                shutil.copy2(submission.path.parent / key, graded / key)


def _students_with_submissions(db_url, assignment_id):
    import warnings

    from nbgrader.api import Gradebook, MissingEntry
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        warnings.simplefilter("ignore")
        try:
            return {s.student.id for s in gb.find_assignment(assignment_id).submissions}
        except MissingEntry:
            return set()


def save_outcomes(assignment_id, outcomes, course_dir=COURSE_DIR):
    """Keep each student's latest outcome (the gradebook has scores, not reasons) for the report;
    `missing` never replaces a graded or not-graded outcome."""
    path = Path(course_dir) / "outcomes" / f"{assignment_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    known.update({o.student: {**asdict(o), "label": o.label} for o in outcomes
                  if not (o.status == MISSING and known.get(o.student, {}).get("status") in (GRADED, "not graded"))})
    path.write_text(json.dumps(known, indent=1, sort_keys=True))


def format_table(assignment_id, outcomes):
    show_late = any(o.late is not None for o in outcomes)
    rows = [("student", "score") + (("late",) if show_late else ()) + ("outcome", "failed tests")]
    for o in outcomes:
        score = f"{o.score:g}/{o.max_score:g}" if o.status == GRADED else "-"
        late = (o.late_label,) if show_late else ()
        rows.append((o.student, score) + late + (o.label, ", ".join(o.failed) or "-"))
    columns = len(rows[0]) - 1
    widths = [max(len(r[i]) for r in rows) for i in range(columns)]
    lines = [f"{assignment_id}"]
    for r in rows:
        lines.append("  ".join(r[i].ljust(widths[i]) for i in range(columns)) + "  " + r[-1])
    return "\n".join(lines)
