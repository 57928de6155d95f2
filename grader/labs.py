"""Debugging labs: a colleague's implementation of an assignment that runs without an error and
is wrong, its bugs taken from the mutation catalogue. The student finds each bug, explains it in
a written answer (graded by hand) and fixes it in place (the assignment's tests, all hidden,
grade the fixed code).

A lab is an assignment whose source notebook's metadata names the assignment it debugs and its
bugs, in the order the answer key lists them:

    "course": {"lab": {"assignment": "a1_self_attention",
                       "bugs": ["mask_with_large_negative", "values_from_k_proj", ...]}}

One source of truth, kept by `sync` and proven by `check`:
- the lab's code and test cells are copies of the assignment's answer and test cells (cell
  metadata "course": {"lab_copy": "<grade id>"}): the code as the reference solution has it, the
  tests entirely hidden; so the fixed code is the reference and the tests are the assignment's;
- the written answer cells bug_1 ... bug_N hold the answer key, made from the catalogue's
  one-line descriptions and the test cells each mutant names in `fails=`;
- `release` plants the bugs: in the released notebook each bugged definition is the mutant's,
  as written in mutants/<assignment id>.py (renamed to the name it replaces, the reference's
  docstrings kept, the mutant's own dropped so that none names its bug).
"""
import ast
import html
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import cells
from .mutants import load_catalogue

MIN_BUGS, MAX_BUGS = 3, 5
WRITTEN_POINTS = 1                 # each bug's explanation, graded by hand
_HIDDEN = re.compile(r"^[ \t]*### (BEGIN|END) HIDDEN TESTS[ \t]*\n?", re.MULTILINE)


class LabError(ValueError):
    """A lab's source names something the catalogue or the assignment does not have."""


@dataclass
class Bug:
    number: int           # its place in the answer key (bug_<number>)
    name: str             # the mutant's name in mutants/<assignment>.py
    replaces: str         # the definition it replaces
    description: str      # the catalogue's one line
    tests: tuple          # the test cells that catch it (the mutant's fails=)
    definition: str       # its code as the release shows it (before the reference's docstrings go in)

    def key(self):
        """The answer key's line for this bug."""
        return (f"**`{self.replaces}`**: {self.description}. "
                f"Caught by {', '.join(f'`{t}`' for t in self.tests) or 'no declared test'}.")


def lab_spec(nb):
    """{"assignment": ..., "bugs": [...]} from a notebook's metadata, or None if it is no lab."""
    spec = nb.metadata.get("course", {}).get("lab")
    return spec if isinstance(spec, dict) else None


def is_lab(course, assignment_id):
    path = course.source_notebook(assignment_id)
    return path.exists() and lab_spec(cells.read(path)) is not None


def debugged_assignment(course, lab_id):
    """The assignment a lab debugs."""
    return lab_spec(cells.read(course.source_notebook(lab_id)))["assignment"]


def lab_bugs(course, lab_id, source=None):
    """The lab's bugs, in order, as the catalogue has them now; LabError with what is wrong."""
    source = source if source is not None else cells.read(course.source_notebook(lab_id))
    spec = lab_spec(source)
    if spec is None:
        raise LabError(f"{lab_id} is not a debugging lab: its notebook's metadata has no course.lab "
                       "(make one with `python -m grader lab ID --from ASSIGNMENT --bugs x,y,z`)")
    assignment, names = spec.get("assignment"), list(spec.get("bugs") or [])
    if assignment not in course.assignment_ids() or is_lab(course, assignment):
        raise LabError(f"{lab_id}: the lab debugs {assignment!r}, which is not an assignment of this course")
    if not MIN_BUGS <= len(names) <= MAX_BUGS or len(set(names)) != len(names):
        raise LabError(f"{lab_id}: a lab has {MIN_BUGS} to {MAX_BUGS} different bugs; its metadata names "
                       f"{len(names)}: {names}")
    catalogue = {m.name: m for m in load_catalogue(course, assignment)}
    private = _private_names(course, assignment)
    bugs = []
    for number, name in enumerate(names, start=1):
        mutant = catalogue.get(name)
        if mutant is None:
            raise LabError(f"{lab_id}: bug {number} is {name!r}, which mutants/{assignment}.py does not have")
        if len(mutant.replaces) != 1:
            raise LabError(f"{lab_id}: bug {name!r} replaces {len(mutant.replaces)} definitions; a lab's bug "
                           "replaces one, in the place the colleague wrote it")
        used = sorted(private & _free_names(mutant.definition))
        if used:
            raise LabError(f"{lab_id}: bug {name!r} calls the catalogue's own helper(s) {', '.join(used)}, "
                           "which the lab's code does not have; a lab's bug must stand alone")
        twin = next((bug for bug in bugs if bug.replaces == mutant.replaces[0]), None)
        if twin is not None:
            raise LabError(f"{lab_id}: bugs {twin.name!r} and {name!r} both replace {twin.replaces}; a lab plants "
                           "one bug per definition")
        bugs.append(Bug(number, name, mutant.replaces[0], mutant.bug, tuple(mutant.fails), mutant.definition))
    return bugs


def _private_names(course, assignment):
    path = course.mutants_dir / f"{assignment}.py"
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_")}


def _free_names(source):
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


# ---- the copies: the assignment's answer and test cells, the written answers' key ----

def copied_source(cell):
    """What the lab's copy of an assignment cell holds: an answer cell's code as the reference has
    it (the solution markers gone), a test cell entirely hidden below its header line, any other
    cell (setup, provided helpers) as it is."""
    if cells.is_answer_cell(cell):
        return cells.without_solution_markers(cell.source).rstrip("\n")
    if cells.is_test_cell(cell):
        header, _, rest = cell.source.partition("\n")
        body = _HIDDEN.sub("", rest).strip("\n")
        return f"{header}\n### BEGIN HIDDEN TESTS\n{body}\n### END HIDDEN TESTS"
    return cell.source


def copy_of(cell):
    """A new lab cell copying `cell` (its nbgrader metadata too)."""
    new = nbformat.v4.new_code_cell(copied_source(cell))
    new.metadata = {key: value for key, value in cell.metadata.items() if key in ("nbgrader", "deletable", "editable")}
    new.metadata["course"] = {**cell.metadata.get("course", {}), "lab_copy": cells.grade_id(cell)}
    return new


def written_cell(bug):
    cell = nbformat.v4.new_markdown_cell(f"### BEGIN SOLUTION\n{bug.key()}\n### END SOLUTION")
    cell.metadata = {"nbgrader": {"grade": True, "grade_id": f"bug_{bug.number}", "locked": False,
                                  "points": WRITTEN_POINTS, "schema_version": 3, "solution": True, "task": False}}
    return cell


def lab_problems(course, lab_id, source=None):
    """What differs between the lab's source and what its assignment and catalogue say now: stale
    copies, assignment cells the lab lacks, written cells that do not match the bugs."""
    source = source if source is not None else cells.read(course.source_notebook(lab_id))
    try:
        bugs = lab_bugs(course, lab_id, source)
    except LabError as error:
        return [str(error)]
    assignment = cells.read(course.source_notebook(lab_spec(source)["assignment"]))
    originals = {cells.grade_id(c): c for c in assignment.cells if cells.grade_id(c)}
    problems, copied = [], set()
    for cell in source.cells:
        gid = cell.metadata.get("course", {}).get("lab_copy")
        if gid is None:
            continue
        copied.add(gid)
        if gid not in originals:
            problems.append(f"its copy of {gid} names a cell the assignment no longer has")
        elif cell.source != copied_source(originals[gid]):
            problems.append(f"its copy of {gid} is stale (run `python -m grader sync {lab_id}`)")
    needed = [gid for gid, c in originals.items() if cells.is_answer_cell(c) or cells.is_test_cell(c)]
    problems += [f"it has no copy of the assignment's cell {gid}" for gid in needed if gid not in copied]
    written = {cells.grade_id(c): c for c in source.cells if cells.is_written_answer(c)}
    wanted = {f"bug_{bug.number}": bug for bug in bugs}
    if set(written) != set(wanted):
        problems.append(f"its written answer cells are {sorted(written)}; its {len(bugs)} bugs need {sorted(wanted)}")
    problems += [f"the answer key in {gid} is stale (run `python -m grader sync {lab_id}`)"
                 for gid, bug in wanted.items() if gid in written and written[gid].source != written_cell(bug).source]
    return problems


def sync_lab(course, lab_id, nb):
    """Refresh the copies and the answer key in the lab's source notebook `nb`; True if it changed."""
    spec = lab_spec(nb)
    assignment = cells.read(course.source_notebook(spec["assignment"]))
    originals = {cells.grade_id(c): c for c in assignment.cells if cells.grade_id(c)}
    keys = {f"bug_{bug.number}": written_cell(bug).source for bug in lab_bugs(course, lab_id, nb)}
    changed = False
    for cell in nb.cells:
        gid = cell.metadata.get("course", {}).get("lab_copy")
        if gid in originals:
            new = copied_source(originals[gid])
        elif cells.is_written_answer(cell) and cells.grade_id(cell) in keys:
            new = keys[cells.grade_id(cell)]
        else:
            continue
        changed, cell.source = changed or new != cell.source, new
    return changed


# ---- planting the bugs in the release ----

def planted_source(reference, bugs):
    """The reference code of one cell with each bug's definition in place of the one it replaces."""
    tree = ast.parse(reference)
    lines = reference.splitlines(keepends=True)
    by_target = {bug.replaces: bug for bug in bugs}
    for node in reversed(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in by_target:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            text = _with_reference_docstrings(by_target[node.name].definition, node, lines)
            lines[start:node.end_lineno] = [text.rstrip("\n") + "\n"]
    return "".join(lines).rstrip("\n")


def _docstring_span(node):
    """(first line, last line), 1-based, of a definition's docstring, or None."""
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.lineno, first.end_lineno
    return None


def _with_reference_docstrings(definition, reference, reference_lines):
    """The mutant's definition without its own docstrings, carrying the reference's instead (of the
    definition and, for a class, of each method both have): nothing in it reads differently from
    the code around it except the code."""
    lines = definition.splitlines(keepends=True)
    node = ast.parse(definition).body[0]
    edits = [(node, reference)]
    if isinstance(node, ast.ClassDef):
        methods = {m.name: m for m in reference.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        edits += [(m, methods.get(m.name)) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for ours, theirs in sorted(edits, key=lambda pair: -pair[0].lineno):
        span = _docstring_span(ours)
        keep = _docstring_span(theirs) if theirs is not None else None
        insert = "".join(reference_lines[keep[0] - 1:keep[1]]) if keep else ""
        if span:
            lines[span[0] - 1:span[1]] = [insert] if insert else []
        elif insert and ours.body:
            at = ours.body[0].lineno - 1
            lines[at:at] = [insert]
    return "".join(lines)


def plant_bugs(course, lab_id, nb, bugs=None):
    """The released lab notebook `nb` with the bugs in its code cells (all of the lab's bugs, or
    `bugs`) and without the lab's metadata, which would name them; changes `nb` and returns it."""
    source = cells.read(course.source_notebook(lab_id))
    all_bugs = lab_bugs(course, lab_id, source)
    chosen = all_bugs if bugs is None else [b for b in all_bugs if b.name in set(bugs)]
    references = {cells.grade_id(c): c.source for c in source.cells if cells.is_answer_cell(c)}
    for cell in nb.cells:
        gid = cells.grade_id(cell)
        if cells.is_answer_cell(cell) and gid in references:
            cell.source = planted_source(references[gid], chosen)
    nb.metadata.get("course", {}).pop("lab", None)
    if "course" in nb.metadata and not nb.metadata["course"]:
        del nb.metadata["course"]
    return nb


def plant_in_release(course, lab_id, release_dir):
    """After nbgrader's generate_assignment: the lab's answer cells get the colleague's code."""
    path = release_dir / lab_id / f"{lab_id}.ipynb"
    nbformat.write(plant_bugs(course, lab_id, cells.read(path)), str(path))


def secret_lines(course, assignment_id):
    """cells.secret_lines of an assignment's source, less, in a lab, the lines of the colleague's code
    students are given (a test of generate and a planted generate may share a line)."""
    secret = cells.secret_lines(cells.read(course.source_notebook(assignment_id)))
    if not is_lab(course, assignment_id):
        return secret
    given = plant_bugs(course, assignment_id, cells.read(course.source_notebook(assignment_id)))
    return secret - {line.strip() for c in given.cells if cells.is_answer_cell(c) for line in c.source.splitlines()}


# ---- after grading: which bugs a student found ----

def bug_outcome(bugs, failed):
    """(found bugs, missed bugs, failed tests that belong to no bug) for a student whose failed test
    cells are `failed`: a bug is found when every test that catches it passes."""
    failed = set(failed)
    missed = [bug for bug in bugs if failed & set(bug.tests)]
    found = [bug for bug in bugs if bug not in missed]
    theirs = {test for bug in bugs for test in bug.tests}
    return found, missed, sorted(failed - theirs)


def feedback_section(bugs, failed):
    """The HTML block a lab's feedback page opens with: each bug missed, with the catalogue's
    description and the test that catches it; new failures the fix brought in."""
    found, missed, other = bug_outcome(bugs, failed)
    items = "".join(f"<li><code>{html.escape(b.replaces)}</code>: {html.escape(b.description)} "
                    f"(caught by {html.escape(', '.join(b.tests))})</li>" for b in missed)
    parts = [f"<h2>Debugging lab: you fixed {len(found)} of {len(bugs)} bugs</h2>"]
    parts.append(f"<p>Still in your code:</p><ul>{items}</ul>" if missed else
                 "<p>Every planted bug is fixed: each test that catches one passes.</p>")
    if other and missed:
        parts.append(f"<p>Also failing: {html.escape(', '.join(other))}. A bug above can break the tests of the code "
                     "that calls it; fix those first.</p>")
    elif other:
        parts.append(f"<p>Failing, though every planted bug is fixed: {html.escape(', '.join(other))}. A fix that "
                     "broke something else?</p>")
    return ('<div class="debugging-lab" style="border:2px solid #4c72b0;padding:0.5em 1em;margin:1em 0">'
            + "".join(parts) + "</div>")


# ---- a new lab ----

def _markdown(text):
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip("\n"))


def new_lab(course, lab_id, assignment_id, bugs, title):
    """Write solutions/<lab_id>/<lab_id>.ipynb: a lab debugging `assignment_id` with `bugs` (names in
    mutants/<assignment_id>.py), made of copies of the assignment's cells, the debugging tools, one
    written answer per bug and the assignment's tests, hidden. Its introduction and probes are then
    the author's to write; `sync` keeps the copies and the key current."""
    path = course.source_notebook(lab_id)
    if path.exists():
        raise LabError(f"{path} exists already; edit its metadata's course.lab to change its bugs")
    assignment = cells.read(course.source_notebook(assignment_id))
    nb = nbformat.v4.new_notebook(metadata={**assignment.metadata,
                                            "course": {"lab": {"assignment": assignment_id, "bugs": list(bugs)}}})
    copies = [c for c in assignment.cells if cells.grade_id(c) and not cells.is_written_answer(c)]
    code = [copy_of(c) for c in copies if not cells.is_test_cell(c)]
    setup = [c for c in code if not cells.is_answer_cell(c) and not _follows_an_answer(c, copies)]
    colleague = [c for c in code if c not in setup]
    tools = nbformat.v4.new_code_cell((Path(__file__).parent / "provided" / "debugging.py").read_text().strip("\n"))
    tools.metadata = {"course": {"provided": "debugging.py"}, "deletable": False, "editable": False,
                      "nbgrader": {"grade": False, "grade_id": "provided_debugging", "locked": True,
                                   "schema_version": 3, "solution": False, "task": False}}
    nb.cells = [_markdown(f"""
        # {title}

        A colleague implemented {assignment_id}. The code below runs without an error, and it is wrong:
        it holds **{len(bugs)} bugs**. Find each one, fix it where it is, and explain it in
        *Your findings*. The assignment's tests grade your fixed code; they are hidden, and nothing
        in this notebook says which functions are wrong.

        **Where to run it.** Locally: `jupyter lab` in the course environment. On Colab or Kaggle: upload
        this one file (or open it from GitHub); nothing needs installing: the runtime's torch and
        matplotlib are all it uses. A GPU runtime works but is not needed. *Restart & Run All* before
        you submit.
        """), *setup,
        _markdown("## Your colleague's code\n\nFix each bug in place; leave the names and signatures as they are."),
        *colleague,
        _markdown("## Tools\n\nNone of these knows where the bugs are; each makes one kind of mistake visible."),
        tools,
        _markdown("## Your findings (graded by hand)\n\nFor each bug: the function, what was wrong, how you "
                  "found it, and how you fixed it, in two or three sentences.")]
    for bug in lab_bugs(course, lab_id, nb):
        nb.cells += [_markdown(f"**Bug {bug.number}.**"), written_cell(bug)]
    nb.cells += [_markdown("## Tests (hidden)\n\nThe grader runs the assignment's tests here."),
                 *[copy_of(c) for c in copies if cells.is_test_cell(c)]]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _follows_an_answer(cell, copies):
    """True for a locked cell the assignment puts after its first answer cell (a4's attach_methods):
    it belongs with the colleague's code, not with the setup."""
    ids = [cells.grade_id(c) for c in copies]
    answers = [i for i, c in enumerate(copies) if cells.is_answer_cell(c)]
    return bool(answers) and ids.index(cell.metadata["course"]["lab_copy"]) > answers[0]


def describe(course, lab_id):
    """A few lines for the instructor: what the lab debugs and its bugs."""
    bugs = lab_bugs(course, lab_id)
    lines = [f"{lab_id}: debugs {debugged_assignment(course, lab_id)}, {len(bugs)} bugs"]
    lines += [f"  bug_{b.number}  {b.name}: {b.replaces}: {b.description} ({', '.join(b.tests)})" for b in bugs]
    return "\n".join(lines)
