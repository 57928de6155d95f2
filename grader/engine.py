"""Grading on Dask distributed, for courses that outgrow one machine.

Why Dask and not Ray: it is pure Python and a small pip install, its scheduler and workers
start from the command line (`dask scheduler`, `dask worker ADDRESS`) or from a university
cluster's batch system (dask-jobqueue for SLURM/PBS), and it needs nothing beyond what the
course already runs. Each task grades one submission on a worker (sanitize, sandboxed kernel,
judge, score into the submission's own gradebook) and sends back plain bytes: the outcome, that
gradebook and the autograded notebook. The merge stays on the machine that asked, one result
at a time, so the course gradebook keeps a single writer.

Workers need this repository at the same path (a shared file system or the same checkout) and
the same environment; the submissions themselves travel with the tasks.
"""
import dataclasses
import tempfile
from pathlib import Path

from .batch import Batch, Graded

_WORKER_BATCHES = {}


def _worker_batch(assignment_id, options):
    key = (assignment_id, tuple(sorted(options.items())))
    if key not in _WORKER_BATCHES:   # one template gradebook and trace per worker process
        scratch = Path(tempfile.mkdtemp(prefix="dask-course-"))
        _WORKER_BATCHES[key] = Batch(assignment_id, course_dir=scratch, **options)
    return _WORKER_BATCHES[key]


def grade_task(assignment_id, submission, content, options):
    """Runs on a Dask worker. `submission` travels without its file, `content` is the file's
    bytes. Returns (outcome, (gradebook bytes, notebook bytes) or None)."""
    batch = _worker_batch(assignment_id, options)
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        if content is not None:
            path = Path(tmp) / submission.path.name
            path.write_bytes(content)
        outcome, pending = batch.grade(dataclasses.replace(submission, path=path))
    if pending is None:
        return outcome, None
    return outcome, (Path(pending.db_url.removeprefix("sqlite:///")).read_bytes(), Path(pending.notebook).read_bytes())


def grade_with_dask(batch, submissions, scheduler=None, workers=2, progress=None):
    """Grade on the cluster at `scheduler` (an address), or on a local cluster of `workers`
    processes; merge each result into the course gradebook as it arrives."""
    from distributed import Client, LocalCluster, as_completed

    cluster = None if scheduler else LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                   dashboard_address=None)
    options = {"cell_timeout": batch.cell_timeout, "total_timeout": batch.total_timeout,
               "sandboxed": batch.sandboxed}
    outcomes = []
    try:
        with Client(scheduler or cluster) as client, tempfile.TemporaryDirectory() as tmp:
            futures = [client.submit(grade_task, batch.assignment_id, s, s.path.read_bytes() if s.path else None,
                                     options, pure=False) for s in submissions]
            for future in as_completed(futures):
                outcome, payload = future.result()
                pending = None
                if payload is not None:
                    folder = Path(tmp) / outcome.student
                    folder.mkdir()
                    (folder / "gradebook.db").write_bytes(payload[0])
                    (folder / "autograded.ipynb").write_bytes(payload[1])
                    pending = Graded(f"sqlite:///{folder / 'gradebook.db'}", folder / "autograded.ipynb")
                batch.merge(outcome, pending)
                outcomes.append(outcome)
                if progress is not None:
                    progress.update(1)
    finally:
        if cluster is not None:
            cluster.close()
    return outcomes
