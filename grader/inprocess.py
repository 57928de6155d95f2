"""Run a trusted notebook's code cells in this process: the reference solution (to record the
expected values, the "trace") and the mutants of the catalogue. No kernel, so a mutant costs
only the time of its own cells.

Never used for student code: that runs in its own kernel (grader/stages/execute.py).
"""
import contextlib
import functools
import io
import linecache
import os
import warnings

from . import cells
from .provided import checks_source
from .runtime.record import TestRecorder, describe_exception, fast_flop_counter, fast_triton_interpreter
from .sandbox import ENVIRON_LOCK, GRADED_RUN_ENV
from .split import CHECK, split_notebook

CHECK_HELPERS = {"close": "check_close", "equal": "check_equal", "between": "check_between", "raises": "check_raises",
                 "no_forbidden_ops": "check_no_forbidden_calls"}


class TraceRecorder:
    """The trusted half of the test cells (grader/split.py): each runs as written on trusted code
    (the reference solution), its checks routed site by site through the notebook's own check
    helpers, and what each check expects is recorded: the trace the judge compares answers with."""

    def __init__(self, split):
        self.split = split
        self.helpers = {"__name__": "course_checks"}
        exec(compiled(checks_source(), "<course checks>"), self.helpers)
        self.test_names = {}

    def run_test(self, grade_id, user_namespace):
        cell, observations = self.split[grade_id], []

        def check(site, kind, *args, **kwargs):
            def capture(kind, actual, expected, what, hint, options):
                plain = self.helpers["plain_value"]
                observations.append({"site": site, "kind": kind, "hidden": cell.sites[site].hidden, "what": what,
                                     "hint": hint, "options": dict(options), "expected": plain(expected)})
            self.helpers["_observe"] = capture
            self.helpers[CHECK_HELPERS[kind]](*args, **kwargs)

        namespace = dict(user_namespace)
        namespace.update(self.test_names)
        namespace[CHECK] = check
        error = None
        try:
            exec(cell.trusted(), namespace)
        except BaseException as exception:
            if isinstance(exception, KeyboardInterrupt):
                raise
            error = describe_exception(exception)
        for name, value in namespace.items():
            if user_namespace.get(name, _MISSING) is not value and not name.startswith("__"):
                self.test_names[name] = value
        return {"grade_id": grade_id, "observations": observations, "error": error}


_MISSING = object()


@functools.lru_cache(maxsize=1024)
def compiled(source, filename):
    """`source` compiled once per process (a code object is immutable, and runs in any namespace): the gate
    runs the same cells and check helpers for every mutant, alternative and seed, and compiling them
    again was about a twentieth of a run."""
    return compile(source, filename, "exec")


class _KernelCodeRecorder(TestRecorder):
    """The kernel's recorder, run here on trusted code: each test cell's kernel code, as a kernel runs it."""

    def __init__(self, split):
        super().__init__(compiled(checks_source(), "<course checks>"))
        self.split = split

    def run_test(self, grade_id, user_namespace):
        return super().run_test(grade_id, user_namespace, code=self.split[grade_id].kernel())


def run_in_process(nb, replacements=(), keep_expected=False, rng_seed=None, device=None, split=None):
    """Execute the code cells in order; test cells run their kernel code (the answers, as a kernel
    records them), or with `keep_expected` their trusted code (what each check expects: the trace).
    `split`: the test cells' split (grader/split.py; default: made from `nb`).

    replacements: (names, source) pairs; after the cell that defines any of `names`, `source`
    is executed too, so the names are rebound (how a mutant replaces a function).
    rng_seed: stand in for a correct student whose code draws on the global random number
    generator differently from the reference (another initialisation, layers created in
    another order): after every answer cell the generator is reseeded from `rng_seed`, and each
    function or class an answer cell defines draws a few numbers from it whenever it is called.
    A test whose verdict changes under this depends on the student's state, not on their answer.
    device: create tensors there unless told otherwise (`with torch.device(device)`), so the
    tests run on a GPU too (`grader check --device cuda`).
    Returns (records by grade id, errors of non-test cells as (cell index, description)).
    """
    import torch

    split = split if split is not None else split_notebook(nb)
    recorder = TraceRecorder(split) if keep_expected else _KernelCodeRecorder(split)
    with environment(**GRADED_RUN_ENV), torch_threads(int(GRADED_RUN_ENV["OMP_NUM_THREADS"])), \
            (torch.device(device) if device else contextlib.nullcontext()):
        # as in the grader's kernels: the same counts, without torch._dynamo's wrapper. Here, in the graded
        # runs' environment: torch.utils.flop_counter imports triton, which reads TRITON_INTERPRET once
        fast_flop_counter()
        fast_triton_interpreter()   # as in the kernels: the same answers, without the discarded overflow checks
        return _run(nb, replacements, recorder, rng_seed)


@contextlib.contextmanager
def torch_threads(count):
    """torch's intra-op threads set to `count` for the run only, as a graded kernel has them
    (OMP_NUM_THREADS, which torch reads once, at its import). The course's tensors are tiny: more
    threads only wait for one another, and a4's solution took 25 to 60 CPU-s with two of them on
    two busy cores, against 1.5 with one."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def environment(**values):
    """Set environment variables for the run only, as they were afterwards: a leaked MPLBACKEND=Agg
    would silence the plots of every kernel this process starts afterwards."""
    with ENVIRON_LOCK:
        saved = {name: os.environ.get(name) for name in values}
        os.environ.update(values)
    try:
        yield
    finally:
        with ENVIRON_LOCK:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _draws_randomness(obj, count):
    """`obj` (a function or class) drawing `count` numbers from the global generator per call."""
    import torch

    if isinstance(obj, type):
        original_init = obj.__init__

        @functools.wraps(original_init)
        def __init__(self, *args, **kwargs):
            torch.rand(count)
            original_init(self, *args, **kwargs)
        obj.__init__ = __init__
        return obj
    if callable(obj):
        @functools.wraps(obj)
        def wrapper(*args, **kwargs):
            torch.rand(count)
            return obj(*args, **kwargs)
        return wrapper
    return obj


def _perturb_rng(namespace, names, rng_seed, index):
    import torch

    for offset, name in enumerate(sorted(names)):
        if name in namespace:
            namespace[name] = _draws_randomness(namespace[name], 1 + (rng_seed + index + offset) % 5)
    torch.manual_seed(1000 * rng_seed + index)


def _run(nb, replacements, recorder, rng_seed=None):
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")   # no windows from trusted notebooks run here
    namespace = {"__name__": "__main__"}
    pending = list(replacements)
    records, errors = {}, []
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            if cells.is_test_cell(cell):
                gid = cells.grade_id(cell)
                if gid in recorder.split:
                    records[gid] = recorder.run_test(gid, namespace)
                continue
            filename = f"<cell {index}>"
            linecache.cache[filename] = (len(cell.source), None, cell.source.splitlines(True), filename)
            try:
                exec(compiled(cell.source, filename), namespace)
            except BaseException as error:  # a broken cell is a result, not a crash
                if isinstance(error, KeyboardInterrupt):
                    raise
                errors.append((index, describe_exception(error)))
            defined = cells.defined_names(cell.source) or set()
            for names, source in [item for item in pending if defined & set(item[0])]:
                exec(compiled(source, f"<replacement {','.join(names)}>"), namespace)
                pending.remove((names, source))
            if rng_seed is not None and cells.is_answer_cell(cell):
                _perturb_rng(namespace, defined, rng_seed, index)
            plt.close("all")
    if pending:
        missing = sorted({name for names, _ in pending for name in names})
        raise ValueError(f"no cell defines {missing}: cannot replace them")
    return records, errors
