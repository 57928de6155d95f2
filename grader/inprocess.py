"""Run a trusted notebook's code cells in this process: the reference solution (to record the
expected values, the "trace") and the mutants of the catalogue. No kernel, so a mutant costs
only the time of its own cells.

Never used for student code: that runs in its own kernel (grader/stages/execute.py).
"""
import contextlib
import io
import linecache
import os
import warnings

from . import notebook as nbtools
from .provided import checks_source
from .runtime.record import TestRecorder, describe_exception
from .sandbox import GRADED_RUN_ENV


def run_in_process(nb, replacements=(), keep_expected=False):
    """Execute the code cells in order; test cells go through the recorder.

    replacements: (names, source) pairs; after the cell that defines any of `names`, `source`
    is executed too, so the names are rebound (how a mutant replaces a function).
    Returns (records by grade id, errors of non-test cells as (cell index, description)).
    """
    with _environment(**GRADED_RUN_ENV):
        return _run(nb, replacements, keep_expected)


@contextlib.contextmanager
def _environment(**values):
    """Set environment variables for the run only: a leaked MPLBACKEND=Agg would silence the
    plots of every kernel this process starts afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(nb, replacements, keep_expected):
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")   # no windows from trusted notebooks run here
    recorder = TestRecorder(checks_source(), keep_expected=keep_expected)
    namespace = {"__name__": "__main__"}
    pending = list(replacements)
    records, errors = {}, []
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if nbtools.is_test_cell(cell):
                gid = nbtools.grade_id(cell)
                records[gid] = recorder.run_test(gid, cell.source, namespace)
                continue
            filename = f"<cell {index}>"
            linecache.cache[filename] = (len(cell.source), None, cell.source.splitlines(True), filename)
            try:
                exec(compile(cell.source, filename, "exec"), namespace)
            except BaseException as error:  # noqa: BLE001 - a broken cell is a result, not a crash
                if isinstance(error, KeyboardInterrupt):
                    raise
                errors.append((index, describe_exception(error)))
            defined = nbtools.defined_names(cell.source) or set()
            for names, source in [item for item in pending if defined & set(item[0])]:
                exec(compile(source, f"<replacement {','.join(names)}>", "exec"), namespace)
                pending.remove((names, source))
            plt.close("all")
    if pending:
        missing = sorted({name for names, _ in pending for name in names})
        raise ValueError(f"no cell defines {missing}: cannot replace them")
    return records, errors
