"""The mutation catalogue: realistic wrong implementations, each named after its bug; and its
dual, the catalogue of alternatives: correct implementations written differently from the
reference, each of which must keep every point.

A catalogue is mutants/<assignment id>.py. Each mutant is an ordinary function or class,
decorated with the name it replaces and the bug it stands for:

    @mutant("scaled_dot_product_attention", "forgets to divide the scores by sqrt(d_k)")
    def missing_scale(q, k, v, mask=None):
        ...

`grader check` runs the solution notebook in-process with the mutant swapped in right after
the cell that defines the original, judges it exactly as a submission is judged, and fails
unless the mutant loses points. `fails=(grade ids)` pins down which test cells must catch it.

A catalogue of alternatives is alternatives/<assignment id>.py, written the same way:

    @alternative("scaled_dot_product_attention", "einsum scores, torch.where mask, float64 inside")
    def einsum_where_float64(q, k, v, mask=None):
        ...

`grader check` runs each one as it runs a mutant and fails if it loses any point: a test that
takes points from correct work written another way is a wrong test. One exception, declared:
`loses=(grade ids)` names the cells of a contract the alternative knowingly does not keep (a5's
float64 precision, for code that computes in float32 inside as many libraries do); it must lose
exactly those cells, and keep every other point.
"""
import ast
import contextlib
import functools
import hashlib
import importlib.util
import inspect
import linecache
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from . import cells
from .sandbox import GRADED_RUN_ENV


@dataclass
class Mutant:
    name: str
    replaces: tuple
    bug: str
    source: str  # code that rebinds the replaced names when executed in the notebook's namespace
    fails: tuple = ()
    definition: str = ""   # its definition as written, named as what it replaces (a debugging lab plants it)
    code: str = ""   # `source` as plain code, for a notebook cell (which shows its source as it is)


@dataclass
class Alternative:
    name: str
    replaces: tuple
    how: str      # how it differs from the reference solution
    source: str
    cpu_only: str = ""   # why it keeps full marks only with tensors on the CPU ("" if on any device)
    definition: str = ""   # its definition as written, named as what it replaces (samples plant it in a submission)
    loses: tuple = ()    # the test cells it loses by design (a contract of their own, such as a precision)


def mutant(replaces, bug, fails=()):
    """Mark a function or class as a mutant of `replaces` (a name, or a tuple of names)."""
    def mark(obj):
        obj.__mutant__ = (replaces if isinstance(replaces, tuple) else (replaces,), bug, tuple(fails))
        return obj
    return mark


def alternative(replaces, how, cpu_only="", loses=()):
    """Mark a function or class as a correct alternative to `replaces` (a name, or a tuple).
    cpu_only: the reason it matches the reference only on the CPU (where grading creates its
    tensors); `check --device cuda` then reports it as not run, with that reason.
    loses: grade ids of the test cells that check a contract this style does not keep (a float64
    precision it computes in float32): the gate requires it to lose those cells and only those."""
    def mark(obj):
        obj.__alternative__ = (replaces if isinstance(replaces, tuple) else (replaces,), how, cpu_only, tuple(loses))
        return obj
    return mark


MARKERS = ("mutant", "alternative")   # the catalogues' own decorators, left out of what an entry defines


def _is_marker(decorator):
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return getattr(call, "id", getattr(call, "attr", None)) in MARKERS


def _rebinding_source(written, target, preamble):
    """Code that defines the entry whose source is `written` under the name `target`, with its decorators but the
    catalogue's (a Triton kernel keeps its @triton.jit), after the catalogue's imports and private helpers."""
    tree = cells.parse(textwrap.dedent(written))
    definition = tree.body[0]
    definition.decorator_list = [d for d in definition.decorator_list if not _is_marker(d)]
    definition.name = target
    return preamble + ast.unparse(tree)


def _inspectable(code, label):
    """`code` wrapped so that what it defines can show its source wherever it runs: the text goes into
    linecache under a name of its own, as IPython puts a cell's. Triton's @triton.jit reads a kernel's source
    (inspect.getsource) to compile or to interpret it."""
    filename = f"<{label}>"
    lines = code.splitlines(keepends=True)
    return (f"import linecache as _linecache\n"
            f"_linecache.cache[{filename!r}] = ({len(code)}, None, {lines!r}, {filename!r})\n"
            f"del _linecache\n"
            f"exec(compile({code!r}, {filename!r}, 'exec'))\n")


def _definition_text(obj, written, target):
    """The entry's source as written (`written`: comments and layout kept), without the catalogue's decorator
    (its others stay), its name replaced by `target`."""
    text = textwrap.dedent(written)
    definition = cells.parse(text).body[0]
    first = min([d.lineno for d in definition.decorator_list if not _is_marker(d)] + [definition.lineno])
    lines = text.splitlines(keepends=True)[first - 1:]
    at = definition.lineno - first                     # the `def` or `class` line
    lines[at] = re.sub(rf"^(\s*(?:async\s+)?(?:def|class)\s+){re.escape(obj.__name__)}\b", rf"\g<1>{target}",
                       lines[at])
    # a signature over several lines: its continuation lines stay aligned with the opening parenthesis
    shift = len(target) - len(obj.__name__)
    for i in range(at + 1, at + definition.body[0].lineno - definition.lineno):
        if shift and lines[i].startswith(" "):
            lines[i] = " " * max(0, len(lines[i]) - len(lines[i].lstrip(" ")) + shift) + lines[i].lstrip(" ")
    return "".join(lines)


def _source_reader(path):
    """source(obj): inspect.getsource(obj) for an entry of the catalogue at `path`. inspect finds a class by
    parsing its whole file again each time it is asked (Python 3.11, 3.12); here the file is parsed once and a
    class found as inspect's _ClassFinder finds a module-level one: the first class of that name outside any
    def or class, from its first decorator, to the end of its block."""
    lines = linecache.getlines(str(path))
    starts = {}

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                starts.setdefault(node.name, (node.decorator_list[0] if node.decorator_list else node).lineno - 1)
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(ast.iter_child_nodes(node))
    visit(cells.parse("".join(lines)).body)

    def source(obj):
        if inspect.isclass(obj) and obj.__qualname__ in starts:
            return "".join(inspect.getblock(lines[starts[obj.__qualname__]:]))
        with cells.PARSE_LOCK:              # inspect parses the whole file
            return inspect.getsource(obj)
    return source


def _preamble(path):
    """The catalogue's imports and private helpers (functions and classes whose names start
    with _), which an entry may use: executed in the notebook's namespace before the entry."""
    tree = cells.parse(Path(path).read_text())
    kept = [node for node in tree.body
            if (isinstance(node, (ast.Import, ast.ImportFrom)) and not _is_grader_import(node))
            or (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_"))]
    return "".join(ast.unparse(node) + "\n" for node in kept)


def _is_grader_import(node):
    module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
    return (module or "").split(".")[0] == "grader"


@contextlib.contextmanager
def _as_graded_runs_import_triton():
    """A catalogue of Triton kernels imports triton, maybe first in this process: it must see the graded runs'
    TRITON_INTERPRET (grader/sandbox.py), since triton.language makes its own kernels at its first import."""
    saved = os.environ.get("TRITON_INTERPRET")
    if "TRITON_INTERPRET" in GRADED_RUN_ENV:
        os.environ["TRITON_INTERPRET"] = GRADED_RUN_ENV["TRITON_INTERPRET"]
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved


def _entries(path, marker):
    """(object name, marker value, source that rebinds the replaced names) for each marked entry.
    Loaded once per content of the file in this process: the gate's parts, the demo's samples and the
    labs each ask for the same catalogue many times, and loading one takes a second or two."""
    if not path.exists():
        return []
    text = path.read_bytes()
    return list(_loaded_entries(path, hashlib.sha256(text).hexdigest(), marker))


@functools.lru_cache(maxsize=64)
def _loaded_entries(path, digest, marker):
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # inspect finds a class's source through its module
    with _as_graded_runs_import_triton():
        spec.loader.exec_module(module)
    preamble = _preamble(path)
    read = _source_reader(path)
    found = []
    for name, obj in vars(module).items():
        if hasattr(obj, marker) and getattr(obj, "__module__", None) == module.__name__:
            value = getattr(obj, marker)
            replaces = value[0]
            written = read(obj)
            source = _rebinding_source(written, replaces[0], preamble)
            source += "".join(f"\n{other} = {replaces[0]}" for other in replaces[1:])
            found.append((name, value, _inspectable(source, f"{path.stem} {marker.strip('_')} {name}"),
                          _definition_text(obj, written, replaces[0]), source))
    return found


def load_catalogue(course, assignment_id):
    """The mutants of mutants/<assignment id>.py."""
    return [Mutant(name, replaces, bug, source, fails, definition, code)
            for name, (replaces, bug, fails), source, definition, code
            in _entries(course.mutants_dir / f"{assignment_id}.py", "__mutant__")]


def load_alternatives(course, assignment_id):
    """The correct alternatives of alternatives/<assignment id>.py."""
    return [Alternative(name, replaces, how, source, cpu_only, definition, loses)
            for name, (replaces, how, cpu_only, loses), source, definition, _
            in _entries(course.alternatives_dir / f"{assignment_id}.py", "__alternative__")]
