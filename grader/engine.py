"""Grading on Dask distributed, for courses that outgrow one machine.

Why Dask and not Ray: it is pure Python and a small pip install, its scheduler and workers
start from the command line (`dask scheduler`, `dask worker ADDRESS`) or from a university
cluster's batch system (dask-jobqueue for SLURM/PBS), and it needs nothing beyond what the
course already runs. Each task runs the GRADE stages for one submission on a worker (in a batch
of its own, prepared once per worker process) and sends back plain bytes: the record, that
submission's gradebook and its autograded notebook. The RECORD stages stay on the machine that
asked, one result at a time, so the course gradebook keeps a single writer.

Workers need this repository at the same path (a shared file system or the same checkout) and
the same environment; the submissions themselves travel with the tasks.
"""
import dataclasses
import tempfile
from pathlib import Path

from . import pipeline

_WORKER_BATCHES = {}


def _worker_batch(course, assignment_id, options):
    key = (course, assignment_id, options)
    if key not in _WORKER_BATCHES:   # one template gradebook and trace per worker process
        scratch = Path(tempfile.mkdtemp(prefix="dask-course-"))
        batch = pipeline.Batch(course.with_grading_dir(scratch), assignment_id, options)
        _WORKER_BATCHES[key] = batch.prepare()
    return _WORKER_BATCHES[key]


def grade_task(course, assignment_id, options, submission, content):
    """Runs on a Dask worker. `submission` travels without its file, `content` is the file's bytes.
    Returns (the graded record, without what only a worker needs; (gradebook bytes, notebook
    bytes) or None)."""
    batch = _worker_batch(course, assignment_id, options)
    with tempfile.TemporaryDirectory() as tmp:
        path = None
        if content is not None:
            path = Path(tmp) / submission.path.name
            path.write_bytes(content)
        graded = pipeline.grade(dataclasses.replace(submission, path=path), batch)
    if graded.autograded is None:
        return graded.lightened(), None
    return graded.lightened(), ((graded.workdir / "gradebook.db").read_bytes(), graded.autograded.read_bytes())


class Dask:
    """The grade phase of pipeline.run on the cluster at `options.scheduler` (an address), or on a
    local cluster of `options.parallel` processes. Its client (and the local cluster) are closed by
    close(), which the run calls however it ends."""
    servers = False          # kernels start on the workers

    def __init__(self, options):
        self.options = options
        self.client = self.cluster = None

    def grade(self, batch, submissions):
        """Yields each submission as its result arrives, ready for the RECORD stages (its gradebook
        and notebook unpacked into the batch's scratch folder)."""
        from distributed import Client, LocalCluster, as_completed

        options = self.options
        if not options.scheduler:
            self.cluster = LocalCluster(n_workers=options.parallel, threads_per_worker=1, processes=True,
                                        dashboard_address=None)
        # a worker's own batch grades and never records: no due date, penalty or progress bar there
        task_options = dataclasses.replace(options, progress=False, scheduler=None, engine="threads", due=None,
                                           late_penalty=None)
        self.client = Client(options.scheduler or self.cluster)
        futures = {self.client.submit(grade_task, batch.course, batch.assignment_id, task_options, s,
                                      s.path.read_bytes() if s.path else None, pure=False): s for s in submissions}
        for future in as_completed(futures):
            graded, payload = future.result()
            graded.path = futures[future].path      # where it is here, not on the worker
            if payload is not None:
                graded.workdir = Path(tempfile.mkdtemp(prefix=f"{graded.student}-", dir=batch.scratch))
                (graded.workdir / "gradebook.db").write_bytes(payload[0])
                graded.autograded = graded.workdir / f"{batch.assignment_id}.ipynb"
                graded.autograded.write_bytes(payload[1])
            yield graded

    def close(self):
        for part in (self.client, self.cluster):
            if part is not None:
                part.close()
        self.client = self.cluster = None

