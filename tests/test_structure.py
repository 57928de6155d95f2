"""The grader's structure shows its pipeline: no import cycles (lazy imports inside functions
count too), and every module is imported by something or run as a program."""
import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"
ENTRY_POINTS = {"grader", "grader.__main__", "grader.cli"}   # run, not imported


def _modules():
    found = {}
    for path in GRADER.rglob("*.py"):
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(modules):
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
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
    # runtime/record.py and stages/execute_worker.py are read as text or run as programs
    read_as_text = "".join(p.read_text() for p in modules.values())
    unused = sorted(name for name in modules
                    if name not in imported and name not in ENTRY_POINTS
                    and not name.startswith("grader.provided.")
                    and not any(other.startswith(name + ".") for other in modules)
                    and f"{name.rsplit('.', 1)[-1]}.py" not in read_as_text)
    assert not unused, f"modules nothing imports: {unused}"
