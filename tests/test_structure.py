"""The grader's structure shows its pipeline: no import cycles (lazy imports inside functions
count too), every module is imported by something or run as a program, stages/ holds the stages and
nothing else, in the order grader/pipeline.py states, and statuses are compared as the enum."""
import ast
import functools
from pathlib import Path

from grader import pipeline
from grader.submission import Status

GRADER = Path(__file__).resolve().parent.parent / "grader"
ENTRY_POINTS = {"grader", "grader.__main__", "grader.cli"}   # run, not imported


def _modules():
    found = {}
    for path in GRADER.rglob("*.py"):
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


@functools.lru_cache(maxsize=None)
def _tree(path):
    """The module's syntax tree, parsed once for every test here and in test_architecture.py (none changes it)."""
    return ast.parse(path.read_text())


def _imports(modules):
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(_tree(path)):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rsplit(".", 1)[0]
                module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
                targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def test_no_import_cycles():
    graph = _imports(_modules())
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles in the grader: " + "; ".join(cycles)


def test_every_module_is_used():
    modules = _modules()
    graph = _imports(modules)
    imported = set().union(*graph.values())
    # grader/provided/ is copied into the notebooks' provided cells (`grader sync`), not imported;
    # runtime/record.py and runtime/execute_worker.py are read as text or run as programs
    read_as_text = "".join(p.read_text() for p in modules.values())
    unused = sorted(name for name in modules
                    if name not in imported and name not in ENTRY_POINTS
                    and not name.startswith("grader.provided.")
                    and not any(other.startswith(name + ".") for other in modules)
                    and f"{name.rsplit('.', 1)[-1]}.py" not in read_as_text)
    assert not unused, f"modules nothing imports: {unused}"


def test_stages_holds_the_stages_and_the_pipeline_lists_them_all():
    """Each module of grader/stages/ is one stage: a function of its own name, listed once in
    pipeline.INTAKE, GRADE or RECORD; nothing else lives there."""
    listed = [stage for group in (pipeline.INTAKE, pipeline.GRADE, pipeline.RECORD) for stage in group]
    names = [f"{stage.__module__.rsplit('.', 1)[-1]}.{stage.__name__}" for stage in listed]
    modules = sorted(p.stem for p in (GRADER / "stages").glob("*.py") if p.stem != "__init__")
    assert sorted(names) == sorted(f"{m}.{m}" for m in modules), \
        f"stages/ has {modules}; the pipeline runs {names}"
    assert names == ["collect.collect", "identify.identify", "sanitize.sanitize", "execute.execute",
                     "judge.judge", "repair.repair", "score.score", "merge.merge", "late.late"]


def test_statuses_are_compared_as_the_enum():
    """A status is `Status.GRADED`, never the string "graded": a typo in a literal would never match."""
    values = {str(status) for status in Status}
    found = []
    for path in GRADER.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    if isinstance(side, ast.Constant) and side.value in values:
                        found.append(f"{path.relative_to(GRADER.parent)}:{node.lineno} compares with {side.value!r}")
    assert not found, "; ".join(found)


def test_the_grader_parses_python_one_thread_at_a_time():
    """Grading threads parse student cells, lab repairs and catalogues at once, and CPython 3.11's parser
    counts its recursion depth per interpreter: two threads in ast.parse together can fail a submission with
    "SystemError: AST constructor recursion depth mismatch". So the grader calls ast.parse only in
    grader/cells.py's `parse`, under its lock (the provided files run in the student's kernel instead)."""
    provided = GRADER / "provided"
    calls = [f"{path.relative_to(GRADER.parent)}:{node.lineno}" for name, path in _modules().items()
             if name != "grader.cells" and provided not in path.parents
             for node in ast.walk(_tree(path))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "ast"]
    assert calls == [], f"ast.parse outside grader/cells.py's parse (use cells.parse): {calls}"
