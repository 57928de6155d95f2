"""Split each test cell in two: the student's answers, computed beside the student's code, and the
judging, which stays in the grader.

A test cell mixes both. `out, w = scaled_dot_product_attention(q, k, v)` makes an answer;
`check_close(out, _reference(q, k, v), "output", hint=...)` names the value it must equal, what
it is and the likely mistake. At grading time the kernel that runs the student's code must never
hold the second half: student code can read and replace anything in its own process (frames, the
garbage collector, IPython's history, the check helpers), so an expected value computed there can
be handed back as the answer, and a hidden test's text can be shown back in an error message.

So each test cell is compiled twice, from one parse:

- the **kernel code** keeps only what computes answers. Every check becomes
  `__observe__(site, lambda: <what the student's code returned>)` -- for `check_raises` the call
  that should raise, for `check_no_forbidden_calls` the traced call -- with no expected value, no
  message, no hint and no tolerance; then every assignment and definition that only fed those
  (a reference implementation, `expected = ...`) is removed. The kernel records each answer or the
  exception it raised, by site number, and cannot tell a check that expects an exception from one
  that expects a value.
- the **trusted code** is the test as written, each check routed through `__check__(site, kind,
  ...)`, run on the reference solution inside the grader: it records what each site expects (the
  trace, grader/trace.py).

The judge (grader/judging.py) pairs the two by site. Kernel code travels to the kernel as a
marshalled code object, one cell at a time (grader/runtime/record.py), never as source text.

Rules for test cells (docs/writing-tests.md): call the check helpers by name, never alias them or
pass them as values; compute inputs with seeded generators, never the global RNG inside an expected
value (it is not computed beside the student's code, so the numbers that follow would differ).
"""
import ast
import copy
import functools
import marshal
import re
from collections import Counter
from dataclasses import dataclass, field

from . import cells

# the check helpers (grader/provided/checks.py) and the kind of observation each makes
CHECKS = {"check_close": "close", "check_equal": "equal", "check_between": "between", "check_raises": "raises",
          "check_no_forbidden_calls": "no_forbidden_ops"}
# keyword arguments that belong to the check, not to the call it makes
CHECK_KEYWORDS = {"what", "hint"}
OBSERVE, CHECK, FORBIDDEN_OPS = "__observe__", "__check__", "__forbidden_ops__"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class SplitError(ValueError):
    """A test cell the split cannot handle safely; the message names the cell and the rule."""


@dataclass(frozen=True)
class Site:
    """One check call in a test cell's source."""
    index: int
    kind: str
    hidden: bool        # written inside a hidden-test region
    line: int


@dataclass
class SplitCell:
    grade_id: str
    kernel_code: bytes          # marshalled code object: the answers only
    trusted_code: bytes         # marshalled code object: the test as written, checks site by site
    sites: dict = field(default_factory=dict)        # index -> Site
    hidden_lines: frozenset = frozenset()            # 1-based source lines inside hidden regions

    def kernel(self):
        return marshal.loads(self.kernel_code)

    def trusted(self):
        return marshal.loads(self.trusted_code)

    def line_is_hidden(self, line):
        """Whether an error at `line` of the test's own code came from a hidden region (unknown: yes)."""
        return not isinstance(line, int) or line in self.hidden_lines


def hidden_lines(source):
    """The 1-based line numbers inside BEGIN/END HIDDEN TESTS markers (the markers included)."""
    inside, found = False, set()
    for number, line in enumerate(source.splitlines(), start=1):
        if HIDDEN_BEGIN in line:
            inside = True
        if inside:
            found.add(number)
        if HIDDEN_END in line:
            inside = False
    return frozenset(found)


def split_notebook(nb):
    """{grade id: SplitCell} for every test cell of `nb` (a source or sanitized notebook)."""
    key = tuple((cell.get("cell_type"), cells.is_test_cell(cell), cells.is_answer_cell(cell), cells.grade_id(cell),
                 cell.get("source", "")) for cell in nb.cells)
    return _split(key)


@functools.lru_cache(maxsize=64)
def _split(key):
    tests, other_loads = [], Counter()
    for cell_type, is_test, is_answer, grade_id, source in key:
        if cell_type != "code":
            continue
        if is_test:
            tests.append((grade_id, source))
        elif not is_answer:
            # provided and demo cells may use what a test cell defined; answer cells are the student's
            other_loads.update(_free_loads(_parse(source, f"cell {grade_id or ''}", strict=False)))
    parsed = []
    for grade_id, source in tests:
        tree = _parse(source, grade_id)
        sites = _number_sites(tree, grade_id, hidden_lines(source))
        parsed.append((grade_id, source, tree, sites))
    kernel_trees = [_without_docstrings(_KernelCode(sites).visit(_copy(tree))) for _, _, tree, sites in parsed]
    _remove_dead_code(kernel_trees, other_loads)
    split = {}
    for (grade_id, source, tree, sites), kernel_tree in zip(parsed, kernel_trees):
        trusted_tree = _TrustedCode(sites).visit(_copy(tree))
        filename = f"<test {grade_id}>"
        split[grade_id] = SplitCell(
            grade_id,
            marshal.dumps(compile(ast.fix_missing_locations(kernel_tree), filename, "exec")),
            marshal.dumps(compile(ast.fix_missing_locations(trusted_tree), filename, "exec")),
            {site.index: site for site in sites.values()}, hidden_lines(source))
    return split


def kernel_sources(nb):
    """{grade id: the kernel code as Python text}: what runs beside the student's code, to read."""
    sources = {}
    parsed = []
    for cell in cells.test_cells(nb):
        tree = _parse(cell.source, cells.grade_id(cell))
        sites = _number_sites(tree, cells.grade_id(cell), hidden_lines(cell.source))
        parsed.append((cells.grade_id(cell), _without_docstrings(_KernelCode(sites).visit(tree))))
    other = Counter()
    for cell in nb.cells:
        if cell.cell_type == "code" and not cells.is_test_cell(cell) and not cells.is_answer_cell(cell):
            other.update(_free_loads(_parse(cell.source, "cell", strict=False)))
    _remove_dead_code([tree for _, tree in parsed], other)
    for grade_id, tree in parsed:
        sources[grade_id] = ast.unparse(ast.fix_missing_locations(tree))
    return sources


# ---- reading a cell ----

_MAGIC = re.compile(r"^\s*[%!].*$", re.MULTILINE)


def _parse(source, name, strict=True):
    try:
        return cells.parse(source)
    except SyntaxError as error:
        if not strict:   # an IPython magic or shell line in a demo cell: read the rest
            try:
                return cells.parse(_MAGIC.sub("pass", source))
            except SyntaxError:
                return ast.Module(body=[], type_ignores=[])
        raise SplitError(f"test cell {name} does not parse: {error}") from error


def _copy(tree):
    return copy.deepcopy(tree)


def _number_sites(tree, grade_id, hidden):
    """{(line, col): Site} of every check call, numbered in source order; a check helper used any
    other way than by calling it is refused (its calls could not be split)."""
    calls, other_uses = [], []
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CHECKS:
            calls.append(node)
            called.add(id(node.func))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in CHECKS and id(node) not in called:
            other_uses.append(node)
        if isinstance(node, ast.ClassDef) and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                                  and n.func.id in CHECKS for n in ast.walk(node)):
            raise SplitError(f"test cell {grade_id}: a check inside a class body (line {node.lineno}) cannot be "
                             "split; call it from a function or the cell itself")
    if other_uses:
        raise SplitError(f"test cell {grade_id}: {other_uses[0].id} is used on line {other_uses[0].lineno} other than "
                         "by calling it by name; the grader can only split direct calls")
    sites = {}
    for index, node in enumerate(sorted(calls, key=lambda n: (n.lineno, n.col_offset))):
        sites[(node.lineno, node.col_offset)] = Site(index, CHECKS[node.func.id], node.lineno in hidden, node.lineno)
    return sites


# ---- the two renderings ----

class _TrustedCode(ast.NodeTransformer):
    """check_close(a, e, ...) -> __check__(site, "close", a, e, ...): the test as written, site by site."""

    def __init__(self, sites):
        self.sites = sites

    def visit_Call(self, node):
        self.generic_visit(node)
        site = self._site(node)
        if site is None:
            return node
        return ast.copy_location(ast.Call(ast.Name(CHECK, ast.Load()),
                                          [ast.Constant(site.index), ast.Constant(site.kind), *node.args],
                                          node.keywords), node)

    def _site(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in CHECKS:
            return self.sites[(node.lineno, node.col_offset)]
        return None


class _KernelCode(_TrustedCode):
    """check_*(...) -> __observe__(site, lambda: <the answer>): nothing of what it is compared with."""

    def visit_Call(self, node):
        site = self._site(node)
        if site is None:
            self.generic_visit(node)
            return node
        answer = self._answer(node, site)
        thunk = ast.Lambda(ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), answer)
        call = ast.Call(ast.Name(OBSERVE, ast.Load()), [ast.Constant(site.index), thunk], [])
        return ast.copy_location(call, node)

    def _answer(self, node, site):
        if any(isinstance(arg, ast.Starred) for arg in node.args[:2]):
            raise SplitError(f"line {node.lineno}: a check's first arguments cannot be starred")
        if site.kind in ("close", "equal", "between"):
            actual = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg == "actual"), None)
            if actual is None:
                raise SplitError(f"line {node.lineno}: a check without the value it checks")
            return self.visit(actual)
        # check_raises(exception_type, function, *args, what, hint, **kwargs) and
        # check_no_forbidden_calls(function, *args, what, **kwargs): the call itself
        first = 1 if site.kind == "raises" else 0
        if len(node.args) <= first:
            raise SplitError(f"line {node.lineno}: {node.func.id} without the function it calls")
        function, *args = [self.visit(arg) for arg in node.args[first:]]
        keywords = [ast.keyword(k.arg, self.visit(k.value)) for k in node.keywords if k.arg not in CHECK_KEYWORDS]
        if site.kind == "raises":
            return ast.Call(function, args, keywords)
        return ast.Call(ast.Name(FORBIDDEN_OPS, ast.Load()), [function, *args], keywords)


def _statement_lists(tree):
    """(owner, list) for every list of statements in `tree` (bodies, branches, handlers, cases)."""
    for node in ast.walk(tree):      # handlers and match cases are nodes of their own
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield node, value


def _without_docstrings(tree):
    """Docstrings and other bare strings go: they are the test's prose, not code the answers need."""
    for _, body in list(_statement_lists(tree)):
        kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                        and isinstance(s.value.value, str))]
        body[:] = kept or [ast.Pass()]
    return tree


# ---- what only fed the expected values: removed from the kernel code ----
# Names are resolved by scope (module, function, lambda, comprehension), as Python resolves them, so
# that a helper's parameter called `expected` does not keep a module-level `expected = ...` alive.

_FUNCTION_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCTION_SCOPES + (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scopes:
    """Which scope each name in a tree belongs to: `key(name_node)` is (scope id or None, name)."""

    def __init__(self, tree):
        self.scope_of = {}        # id(node) -> the innermost scope node around it (None: the module)
        self.local = {}           # id(scope) -> names bound in it
        self.declared_global = {}  # id(scope) -> names declared global or nonlocal in it
        self._visit(tree, None)

    def _visit(self, node, scope):
        self.scope_of[id(node)] = scope
        inner = node if isinstance(node, _SCOPES) else scope
        if isinstance(node, _SCOPES):
            self.local[id(node)] = set()
            self.declared_global[id(node)] = set()
            arguments = getattr(node, "args", None)
            if isinstance(arguments, ast.arguments):
                for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs + \
                        [a for a in (arguments.vararg, arguments.kwarg) if a]:
                    self.local[id(node)].add(arg.arg)
        if inner is not None:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.local[id(inner)].add(node.id)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.declared_global[id(inner)].update(node.names)
        for child in ast.iter_child_nodes(node):
            # a definition's name, decorators and defaults belong to the enclosing scope
            self._visit(child, inner if not _outside(node, child) else scope)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and scope is not None:
            self.local[id(scope)].add(node.name)

    def resolve(self, name, scope):
        """(id of the scope that owns `name` as seen from `scope`, or None for the module, name)."""
        while scope is not None:
            if name in self.local[id(scope)] and name not in self.declared_global[id(scope)]:
                return (id(scope), name)
            scope = self.scope_of[id(scope)]
        return (None, name)


def _outside(parent, child):
    """Parts of a scope node evaluated in the enclosing scope: decorators, defaults, annotations,
    and a comprehension's first iterable."""
    if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return child in parent.decorator_list or child is parent.returns or child is parent.args
    if isinstance(parent, ast.Lambda):
        return child is parent.args
    if isinstance(parent, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return child is parent.generators[0].iter if parent.generators else False
    return False


def _loads(tree, scopes=None):
    """(scope, name) keys read (or deleted) anywhere in `tree`, counted."""
    scopes = scopes or _Scopes(tree)
    found = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Load, ast.Del)):
            found[scopes.resolve(node.id, scopes.scope_of.get(id(node)))] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update((None, name) for name in node.names)
    return found


def _free_loads(tree):
    """The module-level names a cell reads without binding them itself: what it may take from a test
    cell that ran before it (a demo cell's own `expected = ...` keeps nothing of a test's alive)."""
    own = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    own |= {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    return Counter({key: n for key, n in _loads(tree).items() if key[0] is not None or key[1] not in own})


def _bound_names(statement):
    """The names a removable statement binds, or None when it is not one we remove: assignments to
    plain names (also unpacked), and function and class definitions."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = set()
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    names.add(node.id)
                elif not isinstance(node, (ast.Tuple, ast.List, ast.Starred, ast.expr_context)):
                    return None     # an attribute or item assignment changes an object: keep it
        names |= {n.target.id for n in ast.walk(statement) if isinstance(n, ast.NamedExpr)}
        return names
    return None


# calls that only set up a context or iterate, with no effect of their own
_PURE_CALLS = {"zip", "range", "enumerate", "list", "tuple", "reversed", "sorted", "len", "dict", "set",
               "torch.no_grad", "torch.inference_mode", "torch.enable_grad"}


def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return inner and f"{inner}.{node.attr}"
    return None


def _pure(node):
    """An expression that only reads names, attributes, items and constants (and the calls above)."""
    for part in ast.walk(node):
        if isinstance(part, ast.Call) and _dotted(part.func) not in _PURE_CALLS:
            return False
        if isinstance(part, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)):
            return False
    return True


class _Liveness:
    """Backward liveness over structured statements: a statement that binds only names no later
    statement reads is dead and is removed, as is a loop, `with` or `if` left with nothing to do
    (a method call is kept: `loss.backward()` changes more than `loss`). Reads inside a `def` count
    everywhere (the function may be called at any time); a lambda's reads count where it stands (the
    observed answers are called at once)."""

    def __init__(self, scopes, always, in_function):
        self.scopes, self.always, self.in_function = scopes, always, in_function
        self.removed = False

    def uses(self, node):
        return set(_loads(node, self.scopes))

    def keys(self, names, scope):
        return {self.scopes.resolve(name, scope) for name in names}

    def alive(self, keys, live):
        return any(key in live or key in self.always or (key[0] is None and self.in_function) for key in keys)

    def block(self, statements, live, scope, remove, jumps=None):
        jumps = jumps if jumps is not None else {"return": set()}
        """The names live before `statements`, given those live after; removes the dead ones if `remove`."""
        kept = []
        for statement in reversed(statements):
            live, keep = self.statement(statement, live, scope, remove, jumps)
            if keep or not remove:
                kept.append(statement)
            else:
                self.removed = True
        if remove:
            statements[:] = list(reversed(kept)) or [ast.Pass()]
        return live

    def statement(self, node, live, scope, remove, jumps):
        bound = _bound_names(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keys = self.keys(bound, scope)
            if not self.alive(keys, live):
                return live, False
            outside = [*node.decorator_list, *getattr(node, "bases", []), *getattr(node, "keywords", [])]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                outside += [*node.args.defaults, *[d for d in node.args.kw_defaults if d is not None]]
            return (live - keys) | set().union(*(self.uses(part) for part in outside)), True
        if bound is not None:
            keys = self.keys(bound, scope)
            if not self.alive(keys, live):
                return live, False
            return (live - keys) | self.uses(node.value) if node.value is not None else live, True
        if isinstance(node, ast.If):
            after = (self.block(node.body, live, scope, remove, jumps)
                     | self.block(node.orelse, live, scope, remove, jumps))
            if remove and all(isinstance(s, ast.Pass) for s in node.orelse):
                node.orelse = []
            empty = all(isinstance(s, ast.Pass) for s in node.body + node.orelse)
            return after | self.uses(node.test), not (remove and empty and _pure(node.test))
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return self.loop(node, live, scope, remove, jumps)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            inside = self.block(node.body, live, scope, remove, jumps)
            targets = {n.id for item in node.items if item.optional_vars is not None
                       for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)}
            before = (inside - self.keys(targets, scope)) | set().union(
                *(self.uses(item.context_expr) for item in node.items))
            empty = all(isinstance(s, ast.Pass) for s in node.body) and not targets
            return before, not (remove and empty and all(_pure(item.context_expr) for item in node.items))
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            after = self.block(node.finalbody, live, scope, remove, jumps) | live if node.finalbody else live
            if node.finalbody:   # a break, continue or return inside runs the finally block first
                reads = set().union(*(self.uses(s) for s in node.finalbody))
                jumps = {kind: names | reads for kind, names in jumps.items()}
            handled = set().union(*(self.block(h.body, after, scope, remove, jumps) for h in node.handlers))
            after_body = self.block(node.orelse, after, scope, remove, jumps) | after if node.orelse else after
            return self.block(node.body, after_body | handled, scope, remove, jumps) | handled, True
        if isinstance(node, ast.Return):
            return (self.uses(node.value) if node.value is not None else set()) | jumps["return"], True
        if isinstance(node, ast.Break) and "break" in jumps:
            return set(jumps["break"]), True
        if isinstance(node, ast.Continue) and "continue" in jumps:
            return set(jumps["continue"]), True
        return live | self.uses(node), True

    def loop(self, node, live, scope, remove, jumps):
        is_for = not isinstance(node, ast.While)
        exit_live = live | (self.block(node.orelse, live, scope, remove, jumps) if node.orelse else set())
        targets = set()
        if is_for:
            targets = self.keys({n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}, scope)
        head = set(exit_live)
        while True:       # the loop head's live names: a fixpoint, found without removing anything
            body = self.block(node.body, head, scope, False, {**jumps, "break": live, "continue": head})
            new = exit_live | (body - targets) | (set() if is_for else self.uses(node.test))
            if new <= head:
                break
            head |= new
        if remove:
            self.block(node.body, head, scope, True, {**jumps, "break": live, "continue": head})
        empty = all(isinstance(s, ast.Pass) for s in node.body)
        before = head | (self.uses(node.iter) if is_for else set())
        pure = _pure(node.iter) if is_for else False
        return before, not (remove and empty and pure and not node.orelse)


def _deferred_reads(tree, scopes):
    """Keys read inside a `def` that belong to another scope: live everywhere, as the function may run
    at any time after it is defined."""
    found = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for key in _loads(function, scopes):
                if key[0] != id(function):
                    found.add(key)
    return found


def _remove_dead_code(trees, other_loads):
    """Remove what only fed expected values: every statement whose effect nothing later reads, cell
    by cell from the last (the cells run in order, so each cell's live names flow into the one
    before), then inside each function; again until nothing changes."""
    while True:
        scopes = [_Scopes(tree) for tree in trees]
        always = set(other_loads)
        for tree, scope in zip(trees, scopes):
            always |= _deferred_reads(tree, scope)
        removed = False
        live = set()
        for tree, scope in reversed(list(zip(trees, scopes))):
            analysis = _Liveness(scope, always, in_function=False)
            live = analysis.block(tree.body, live, None, remove=True)
            for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
                inner = _Liveness(scope, always, in_function=True)
                inner.block(function.body, set(), function, remove=True)
                removed |= inner.removed
            removed |= analysis.removed
        if not removed:
            return
