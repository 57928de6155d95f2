"""Debugging labs: a colleague's implementation of an assignment that runs without an error and
is wrong, its bugs chosen from the mutation catalogue. The student finds each bug, repairs it in
place and writes up each finding; the findings carry most of the points (graded by hand against a
rubric, with an answer key only the grader sees), and a bug's tests pay only for a repair of the
colleague's code, not for a rewrite of it.

A lab is an assignment whose source notebook's metadata names the assignment it debugs, its bugs
(in the order their definitions appear) and the parts of the answer key only its author can write:

    "course": {"lab": {"assignment": "a1_self_attention",
                       "bugs": ["mask_with_large_negative", "loop_missing_scale", ...],
                       "key": {"mask_with_large_negative": {"symptom": "...", "evidence": "...",
                                                            "effect": "..."}, ...},
                       "leaves_out": {"test_float64_precision": "why the lab does without it"}}}

The colleague's code. Each answer cell copies the assignment's reference answer cell, except for
the definitions that hold a bug: those are the colleague's own, written in another hand than the
reference and the catalogue's alternatives (so that pasting a correct solution over the lab is a
rewrite, never a repair), with each bug's lines in a fix region:

            ### BEGIN FIX
            scores = scores.masked_fill(~mask, float("-inf"))
            ### PLANTED
            # scores = scores.masked_fill(~mask, -1e9)
            ### END FIX

The source runs the fixed lines (the planted ones are comments): it is the fixed lab, the reference
the gate proves. `release` plants the bugs (the planted lines, uncommented, in place of the fixed
ones; every marker gone). The gate proves each planted definition fails exactly the test cells its
catalogue mutant fails, so the bug is the catalogue's, written in the colleague's hand.

Grading the fix (grader/stages/repair.py): for each bug, the student's definition of its name is
compared with the planted one, token by token after parsing (comments, docstrings and layout do not
count). A repair keeps the colleague's code: it removes or changes at most a budget of its tokens and
adds at most another (`repair_budget`); a rewrite, or a replacement (the name bound to something
else, patched, delegating to new code, or dead code left behind), loses the points of that bug's
tests, and the feedback names it. A fix that breaks something else loses those tests as any
wrong code does.

The findings: one nbgrader "manually graded task" cell per bug (bug_1 ...), worth FINDING_POINTS:
the rubric students and graders see, and, between nbgrader's MARK SCHEME markers, the answer key,
which nbgrader removes from the release and puts back in the autograded notebook the Formgrader
shows (the feedback removes it again). The student writes each finding in the cell below its task.
"""
import ast
import difflib
import functools
import html
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat

from . import cells, store
from .mutants import load_alternatives, load_catalogue

MIN_BUGS, MAX_BUGS = 3, 5
# the findings: what each of the five parts of a finding must say; POINTS_PER_PART each
RUBRIC = (("Where", "the function or method that holds the bug"),
          ("Symptom", "what comes out wrong, and for which input"),
          ("Evidence", "the tool call that showed it (show_shapes, compare, count_flops, check_gradients, "
                       "properties, a tensor's nbytes) and what it printed"),
          ("Fix", "the line(s) before and after your repair"),
          ("Effect", "one number that the bug changed, before and after the repair"))
POINTS_PER_PART = 2
FINDING_POINTS = POINTS_PER_PART * len(RUBRIC)
KEY_PARTS = ("symptom", "evidence", "effect")     # the answer key's parts only the lab's author can write
# how much of the colleague's definition a repair may remove or change, and how much it may add, in
# tokens: REPAIR_FACTOR times the lab's own repair, at least these (see repair_budget)
MIN_REMOVED, MIN_ADDED, REPAIR_FACTOR = 10, 30, 3

FIX_BEGIN, FIX_PLANTED, FIX_END = "### BEGIN FIX", "### PLANTED", "### END FIX"
MARK_BEGIN, MARK_END = "=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ==="
_REGION = re.compile(r"^([ \t]*)### BEGIN FIX[ \t]*\n(.*?)^[ \t]*### PLANTED[ \t]*\n(.*?)^[ \t]*### END FIX[ \t]*$\n?",
                     re.MULTILINE | re.DOTALL)
_MARKER = re.compile(r"^[ \t]*### (BEGIN FIX|PLANTED|END FIX)\b", re.MULTILINE)
_HIDDEN = re.compile(r"^[ \t]*### (BEGIN|END) HIDDEN TESTS[ \t]*\n?", re.MULTILINE)


class LabError(ValueError):
    """A lab's source names something the catalogue or the assignment does not have."""


@dataclass
class Bug:
    number: int           # its place in the findings (bug_<number>)
    name: str             # the mutant's name in mutants/<assignment>.py
    replaces: str         # the definition it is in
    description: str      # the catalogue's one line
    tests: tuple          # the test cells that catch it (the mutant's fails=)
    mutant_source: str    # the catalogue mutant's code, which rebinds `replaces` (the gate runs it beside the lab's)
    raw: str = ""         # the colleague's definition as the lab's source writes it, fix regions included
    planted: str = ""     # ... as released: the bug in
    fixed: str = ""       # ... repaired: what the lab's source runs
    key: dict = None      # the author's parts of the answer key (KEY_PARTS)
    breaks: tuple = ()    # every test cell it fails planted alone (its `tests` and what they cascade to)

    @property
    def fix_size(self):
        """(tokens removed or changed, tokens added) by the lab's own repair of the planted definition."""
        return edit_size(definition_tokens(self.planted), definition_tokens(self.fixed))

    @property
    def budget(self):
        return repair_budget(self.fix_size)

    def catalogue_line(self):
        return (f"**`{self.replaces}`**: {self.description}. "
                f"Caught by {', '.join(f'`{t}`' for t in self.tests) or 'no declared test'}.")


def repair_budget(fix_size):
    """(most tokens removed or changed, most tokens added) of a planted definition in a repair: three
    times the lab's own repair, and at least MIN_REMOVED and MIN_ADDED. Why: students repair the same
    bug another way (another expression, a guard or a line added where the lab changes a token, a
    value named), so a repair may differ from the lab's, but it keeps the colleague's code; a rewrite
    replaces it. The gate proves that the assignment's reference and every catalogued alternative of
    the definition, pasted over it, remove more than the budget."""
    removed, added = fix_size
    return max(MIN_REMOVED, REPAIR_FACTOR * removed), max(MIN_ADDED, REPAIR_FACTOR * added)


def lab_spec(nb):
    """{"assignment": ..., "bugs": [...], "key": {...}} from a notebook's metadata, or None if it is no lab."""
    spec = nb.metadata.get("course", {}).get("lab")
    return spec if isinstance(spec, dict) else None


def is_lab(course, assignment_id):
    path = course.source_notebook(assignment_id)
    return path.exists() and lab_spec(cells.read(path)) is not None


def debugged_assignment(course, lab_id):
    """The assignment a lab debugs."""
    return lab_spec(cells.read(course.source_notebook(lab_id)))["assignment"]


def lab_bugs(course, lab_id, source=None):
    """The lab's bugs, in order, with the colleague's planted and fixed definitions; LabError with
    what is wrong."""
    source = source if source is not None else cells.read(course.source_notebook(lab_id))
    spec = lab_spec(source)
    if spec is None:
        raise LabError(f"{lab_id} is not a debugging lab: its notebook's metadata has no course.lab "
                       "(make one with `python -m grader lab ID --from ASSIGNMENT --bugs x,y,z`)")
    assignment, names = spec.get("assignment"), list(spec.get("bugs") or [])
    if not isinstance(assignment, str) or not (course.mutants_dir / f"{assignment}.py").is_file() \
            or is_lab(course, assignment):
        raise LabError(f"{lab_id}: the lab debugs {assignment!r}, which is not an assignment of this course with a "
                       "mutation catalogue")
    if not MIN_BUGS <= len(names) <= MAX_BUGS or len(set(names)) != len(names):
        raise LabError(f"{lab_id}: a lab has {MIN_BUGS} to {MAX_BUGS} different bugs; its metadata names "
                       f"{len(names)}: {names}")
    catalogue = _catalogue(course, assignment)
    placed = {}
    for number, name in enumerate(names, start=1):
        mutant = catalogue.get(name)
        if mutant is None:
            raise LabError(f"{lab_id}: bug {number} is {name!r}, which mutants/{assignment}.py does not have")
        if len(mutant.replaces) != 1:
            raise LabError(f"{lab_id}: bug {name!r} replaces {len(mutant.replaces)} definitions; a lab's bug "
                           "is in one definition, where the colleague wrote it")
        if mutant.replaces[0] in placed:
            raise LabError(f"{lab_id}: bugs {placed[mutant.replaces[0]]!r} and {name!r} are both in "
                           f"{mutant.replaces[0]}; a lab plants one bug per definition")
        placed[mutant.replaces[0]] = name
    own = colleague_definitions(source)
    bugs = []
    for number, name in enumerate(names, start=1):
        mutant = catalogue[name]
        target = mutant.replaces[0]
        text = own.get(target)
        if text is None:
            raise LabError(f"{lab_id}: no answer cell of the lab defines {target}, where bug {name!r} belongs")
        if not _REGION.search(text):
            raise LabError(f"{lab_id}: the colleague's {target} has no fix region ({FIX_BEGIN} ... {FIX_PLANTED} "
                           f"... {FIX_END}) for bug {name!r} (`python -m grader sync {lab_id}` seeds one)")
        measured = tuple((spec.get("breaks") or {}).get(name) or ())
        tests = tuple(g for g in mutant.fails if g not in (spec.get("leaves_out") or {}))   # the lab's cells only
        bugs.append(Bug(number, name, target, mutant.bug, tests, mutant.source, raw=text,
                        planted=resolve_regions(text, {target}), fixed=resolve_regions(text, set()),
                        key=dict((spec.get("key") or {}).get(name) or {}),
                        breaks=tuple(dict.fromkeys(tests + measured))))
    return bugs


def _catalogue(course, assignment):
    """{name: mutant} of mutants/<assignment>.py, loaded once while the file is unchanged."""
    path = course.mutants_dir / f"{assignment}.py"
    return _loaded_catalogue(str(course.root), assignment, path.stat().st_mtime_ns if path.exists() else 0)


@functools.lru_cache(maxsize=8)
def _loaded_catalogue(root, assignment, stamp):
    from .course import Course
    return {m.name: m for m in load_catalogue(Course(Path(root)), assignment)}


# ---- fix regions ----

def _uncomment(line):
    match = re.match(r"^([ \t]*)# ?(.*)$", line)
    return match[1] + match[2] if match else line


def _comment(line, indent):
    return (indent + "# " + line[len(indent):]) if line.startswith(indent) else "# " + line


def _top_level_spans(text):
    """{name: (first line, last line)}, 1-based, of each top-level definition, its decorators and the
    indented comments after its last statement (a fix region can end a definition) included."""
    lines = text.splitlines()
    try:
        body = cells.parse(text).body
    except SyntaxError:
        return {}
    starts = [min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", [])]) for n in body]
    spans = {}
    for index, node in enumerate(body):
        end = (starts[index + 1] - 1) if index + 1 < len(body) else len(lines)
        while end > node.end_lineno and (not lines[end - 1].strip() or not lines[end - 1][:1].isspace()):
            end -= 1
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            spans[node.name] = (starts[index], end)
    return spans


def resolve_regions(text, planted_names):
    """`text` with every fix region resolved: the planted lines (uncommented) where the region is in a
    definition named in `planted_names`, the fixed lines elsewhere; no marker left."""
    spans = _top_level_spans(text)

    def owner(position):
        line = text.count("\n", 0, position) + 1
        return next((name for name, (first, last) in spans.items() if first <= line <= last), None)

    def resolve(match):
        fixed, planted = match[2], match[3]
        if owner(match.start()) in planted_names:
            return "".join(_uncomment(line) + "\n" for line in planted.splitlines())
        return fixed
    resolved = _REGION.sub(resolve, text)
    if _MARKER.search(resolved):
        raise LabError(f"a fix region is not closed: {_MARKER.search(resolved)[0].strip()!r} left over")
    return resolved


def regions_of(text):
    """[(planted lines, fixed lines)] of each fix region in `text`, dedented, for the answer key."""
    return [(textwrap.dedent("".join(_uncomment(line) + "\n" for line in m[3].splitlines())).strip("\n"),
             textwrap.dedent(m[2]).strip("\n")) for m in _REGION.finditer(text)]


def seeded_definition(reference, planted, standalone=True):
    """A first colleague's definition: the reference's, with a fix region wherever the catalogue's
    mutant (`planted`, named as the reference) differs from it line by line. `grader lab` starts a new
    lab's definitions from it; its author then rewrites them in the colleague's own hand (the gate
    fails until the reference pasted over it is a rewrite). A mutant that is not `standalone` (it
    calls the catalogue's own helpers, or differs in its first line) gets an empty region to fill in."""
    ref, bug = reference.rstrip("\n").splitlines(), planted.rstrip("\n").splitlines()
    opcodes = difflib.SequenceMatcher(None, ref, bug, autojunk=False).get_opcodes()
    if not standalone or any(op != "equal" and i1 == 0 for op, i1, i2, j1, j2 in opcodes):
        body = cells.parse(reference).body[0].body
        at = body[0].lineno - 1
        indent = ref[at][:len(ref[at]) - len(ref[at].lstrip())]
        todo = [indent + FIX_BEGIN, indent + FIX_PLANTED, f"{indent}# pass  # plant the bug here: write its lines "
                "above as they are repaired, here as planted", indent + FIX_END]
        return "\n".join(ref[:at] + todo + ref[at:]) + "\n"
    out = []
    for op, i1, i2, j1, j2 in opcodes:
        if op == "equal":
            out += ref[i1:i2]
            continue
        sample = (ref[i1:i2] + bug[j1:j2])[0]
        indent = sample[:len(sample) - len(sample.lstrip())]
        out += [indent + FIX_BEGIN, *ref[i1:i2], indent + FIX_PLANTED,
                *[_comment(line, indent) for line in bug[j1:j2]], indent + FIX_END]
    return "\n".join(out) + "\n"


# ---- the colleague's code: copies of the assignment's answer cells, its own bugged definitions ----

def colleague_definitions(nb):
    """{name: text} of every top-level definition in the lab's answer cells, fix regions included."""
    found = {}
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            lines = cell.source.splitlines(keepends=True)
            for name, (first, last) in _top_level_spans(cell.source).items():
                found[name] = "".join(lines[first - 1:last])
    return found


def with_definitions(reference, own):
    """The reference answer cell's code (solution markers gone) with the definitions named in `own`
    replaced by `own`'s text."""
    text = cells.without_solution_markers(reference).rstrip("\n")
    lines = text.splitlines(keepends=True)
    for name, (first, last) in sorted(_top_level_spans(text).items(), key=lambda item: -item[1][0]):
        if name in own:
            lines[first - 1:last] = [own[name].rstrip("\n") + "\n"]
    return "".join(lines).rstrip("\n")


def copied_source(cell, own=None):
    """What the lab's copy of an assignment cell holds: an answer cell's code as the reference has
    it, but for the colleague's own bugged definitions (`own`); a test cell entirely hidden below its
    header line; any other cell (setup, provided helpers) as it is."""
    if cells.is_answer_cell(cell):
        return with_definitions(cell.source, own or {})
    if cells.is_test_cell(cell):
        header, _, rest = cell.source.partition("\n")
        body = _HIDDEN.sub("", rest).strip("\n")
        return f"{header}\n### BEGIN HIDDEN TESTS\n{body}\n### END HIDDEN TESTS"
    return cell.source


def copy_of(cell, own=None):
    """A new lab cell copying `cell` (its nbgrader metadata too)."""
    new = nbformat.v4.new_code_cell(copied_source(cell, own))
    new.metadata = {key: value for key, value in cell.metadata.items() if key in ("nbgrader", "deletable", "editable")}
    new.metadata["course"] = {**cell.metadata.get("course", {}), "lab_copy": cells.grade_id(cell)}
    return new


def _bugged_names(course, spec):
    catalogue = _catalogue(course, spec["assignment"])
    return {catalogue[name].replaces[0]: catalogue[name] for name in spec.get("bugs") or [] if name in catalogue}


def _own_definitions(course, nb, originals):
    """{name: text} of the colleague's bugged definitions: the lab's, or, for a bug whose definition
    has no fix region yet, one seeded from the reference and the catalogue's mutant."""
    spec = lab_spec(nb)
    present = colleague_definitions(nb)
    reference = {}
    for cell in originals.values():
        if cells.is_answer_cell(cell):
            text = cells.without_solution_markers(cell.source)
            lines = text.splitlines(keepends=True)
            reference.update({name: "".join(lines[a - 1:b]) for name, (a, b) in _top_level_spans(text).items()})
    own = {}
    for name, mutant in _bugged_names(course, spec).items():
        if name in present and _REGION.search(present[name]):
            own[name] = present[name]
        elif name in reference:
            node = next(n for n in cells.parse(reference[name]).body if getattr(n, "name", None) == name)
            bug = _with_reference_docstrings(mutant.definition, node, reference[name].splitlines(keepends=True))
            standalone = not (_private_names(course, spec["assignment"]) & _free_names(mutant.definition))
            own[name] = seeded_definition(reference[name], bug, standalone)
    return own


def _docstring_span(node):
    """(first line, last line), 1-based, of a definition's docstring, or None."""
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.lineno, first.end_lineno
    return None


def _with_reference_docstrings(definition, reference, reference_lines):
    """The mutant's definition without its own docstrings, carrying the reference's instead (of the
    definition and, for a class, of each method both have), so that a seeded definition reads like
    the code around it."""
    lines = definition.splitlines(keepends=True)
    node = cells.parse(definition).body[0]
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


def _private_names(course, assignment):
    tree = cells.parse((course.mutants_dir / f"{assignment}.py").read_text())
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_")}


def _free_names(source):
    return {node.id for node in ast.walk(cells.parse(source)) if isinstance(node, ast.Name)}


# ---- the findings: a task cell per bug, its rubric and answer key ----

def finding_source(bug, assignment):
    """A finding's task cell: the rubric, then the answer key between nbgrader's mark-scheme markers
    (removed from the release, put back in the notebook the Formgrader shows)."""
    rubric = "\n".join(f"{i}. **{part}**: {what}." for i, (part, what) in enumerate(RUBRIC, start=1))
    key = bug.key or {}
    fixes = "\n".join(f"   - before:\n     ```python\n{textwrap.indent(before or '(nothing)', '     ')}\n     ```\n"
                      f"     after:\n     ```python\n{textwrap.indent(after or '(nothing)', '     ')}\n     ```"
                      for before, after in regions_of(bug.raw))
    return (f"### Finding {bug.number} ({FINDING_POINTS} points)\n\n"
            f"One bug, written up in the cell below: {POINTS_PER_PART} points for each part "
            f"({POINTS_PER_PART}: right and specific; 1: partly; 0: missing or wrong).\n\n{rubric}\n\n"
            f"{MARK_BEGIN}\n"
            f"**Answer key, bug {bug.number}**: `{bug.name}` of mutants/{assignment}.py ({bug.description}); "
            f"its tests: {', '.join(bug.tests)}. Findings come in the order of the functions in the notebook; "
            f"grade a finding about another bug with that bug's key.\n\n"
            f"1. Where: `{bug.replaces}`.\n"
            f"2. Symptom: {key.get('symptom') or 'TODO'}\n"
            f"3. Evidence: {key.get('evidence') or 'TODO'}\n"
            f"4. Fix ({bug.fix_size[0]} tokens removed or changed, {bug.fix_size[1]} added; the tests pay for a "
            f"repair that removes up to {bug.budget[0]} and adds up to {bug.budget[1]}):\n{fixes}\n"
            f"5. Effect: {key.get('effect') or 'TODO'}\n"
            f"{MARK_END}")


def finding_cell(source, number):
    """nbgrader's "manually graded task" cell of finding `number`."""
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata = {"deletable": False, "editable": False,
                     "nbgrader": {"grade": False, "grade_id": f"bug_{number}", "locked": True,
                                  "points": FINDING_POINTS, "schema_version": 3, "solution": False, "task": True}}
    return cell


def answer_cell(number):
    """Where the student writes finding `number`: an ordinary cell (nbgrader grades the task above it)."""
    return nbformat.v4.new_markdown_cell(f"*Finding {number}: write it here.*")


def is_finding(cell):
    meta = cells.nbgrader_meta(cell)
    return cell.get("cell_type") == "markdown" and bool(meta.get("task")) and \
        str(meta.get("grade_id", "")).startswith("bug_")


def finding_points(nb):
    return sum(cells.points(c) for c in nb.cells if is_finding(c))


# ---- keeping the lab current: sync and check ----

def lab_problems(course, lab_id, source=None):
    """What differs between the lab's source and what its assignment and catalogue say now: stale
    copies, assignment cells the lab lacks, findings that do not match the bugs or miss a key part."""
    source = source if source is not None else cells.read(course.source_notebook(lab_id))
    try:
        bugs = lab_bugs(course, lab_id, source)
    except LabError as error:
        return [str(error)]
    spec = lab_spec(source)
    assignment = cells.read(course.source_notebook(spec["assignment"]))
    originals = {cells.grade_id(c): c for c in assignment.cells if cells.grade_id(c)}
    own = {bug.replaces: bug.raw for bug in bugs}
    problems, copied = [], set()
    for cell in source.cells:
        gid = cell.metadata.get("course", {}).get("lab_copy")
        if gid is None:
            continue
        copied.add(gid)
        if gid not in originals:
            problems.append(f"its copy of {gid} names a cell the assignment no longer has")
        elif cell.source != copied_source(originals[gid], own):
            problems.append(f"its copy of {gid} is stale (run `python -m grader sync {lab_id}`)")
    left_out = spec.get("leaves_out") or {}
    needed = [gid for gid, c in originals.items() if cells.is_answer_cell(c) or cells.is_test_cell(c)]
    problems += [f"it has no copy of the assignment's cell {gid}" for gid in needed
                 if gid not in copied and gid not in left_out]
    problems += [f"it leaves out {gid} and copies it too" for gid in left_out if gid in copied]
    problems += [f"it leaves out {gid} without saying why (course.lab.leaves_out.{gid})"
                 for gid, why in left_out.items() if not str(why).strip()]
    findings = {cells.grade_id(c): c for c in source.cells if is_finding(c)}
    wanted = {f"bug_{bug.number}": bug for bug in bugs}
    if set(findings) != set(wanted):
        problems.append(f"its findings are {sorted(findings)}; its {len(bugs)} bugs need {sorted(wanted)}")
    problems += [f"the answer key in {gid} is stale (run `python -m grader sync {lab_id}`)"
                 for gid, bug in wanted.items()
                 if gid in findings and findings[gid].source != finding_source(bug, spec["assignment"])]
    problems += [f"bug {bug.name}'s answer key has no {part} (metadata course.lab.key.{bug.name}.{part})"
                 for bug in bugs for part in KEY_PARTS if not (bug.key or {}).get(part) or bug.key[part] == "TODO"]
    measured = spec.get("breaks") or {}
    problems += [f"what bug {bug.name} breaks is not measured (run `python -m grader lab {lab_id} --measure`)"
                 for bug in bugs if bug.name not in measured]
    order = list(colleague_definitions(source))
    if [bug.replaces for bug in bugs] != sorted((bug.replaces for bug in bugs), key=order.index):
        problems.append("its bugs are not listed in the order their definitions appear (the findings and their "
                        "keys follow that order)")
    if any(cells.is_written_answer(c) for c in source.cells):
        problems.append("it has written-answer cells; a lab's findings are task cells (bug_1 ...) with the rubric")
    return problems


def sync_lab(course, lab_id, nb):
    """Refresh the copies (a bugged definition without a fix region gets one seeded from the catalogue)
    and the findings' rubric and key in the lab's source notebook `nb`; True if it changed."""
    spec = lab_spec(nb)
    assignment = cells.read(course.source_notebook(spec["assignment"]))
    originals = {cells.grade_id(c): c for c in assignment.cells if cells.grade_id(c)}
    own = _own_definitions(course, nb, originals)
    changed = False
    for cell in nb.cells:
        gid = cell.metadata.get("course", {}).get("lab_copy")
        if gid in originals:
            new = copied_source(originals[gid], own)
            changed, cell.source = changed or new != cell.source, new
    keys = {f"bug_{bug.number}": finding_source(bug, spec["assignment"]) for bug in lab_bugs(course, lab_id, nb)}
    for cell in nb.cells:
        if is_finding(cell) and cells.grade_id(cell) in keys:
            new = keys[cells.grade_id(cell)]
            changed, cell.source = changed or new != cell.source, new
    return changed


# ---- planting the bugs in the release ----

def plant_bugs(course, lab_id, nb, bugs=None):
    """`nb` (the lab's release or source) with its answer cells holding the colleague's code: every bug
    planted (or those named in `bugs`), the others repaired, no fix marker left; without the lab's
    metadata, which would name the bugs. Changes `nb` and returns it."""
    source = cells.read(course.source_notebook(lab_id))
    all_bugs = lab_bugs(course, lab_id, source)
    chosen = {b.replaces for b in all_bugs if bugs is None or b.name in set(bugs)}
    written = {cells.grade_id(c): c.source for c in source.cells if cells.is_answer_cell(c)}
    for cell in nb.cells:
        gid = cells.grade_id(cell)
        if cells.is_answer_cell(cell) and gid in written:
            cell.source = resolve_regions(written[gid], chosen).rstrip("\n")
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
    students are given (a test of generate and a planted generate may share a line), plus the lines
    only its answer key (the findings' mark schemes) has."""
    source = cells.read(course.source_notebook(assignment_id))
    secret = cells.secret_lines(source)
    if lab_spec(source) is None:
        return secret
    given = plant_bugs(course, assignment_id, cells.read(course.source_notebook(assignment_id)))
    shown = {line.strip() for c in given.cells if not is_finding(c) for line in c.source.splitlines()}
    key = {line.strip() for c in source.cells if is_finding(c)
           for line in c.source.split(MARK_BEGIN, 1)[-1].split(MARK_END, 1)[0].splitlines()}
    return (secret - shown) | {line for line in key - shown if len(line) >= 26}


# ---- grading the fix: was each bugged definition repaired, or rewritten? ----

REPAIRED, UNCHANGED, REWRITTEN, REPLACED, MISSING = "repaired", "unchanged", "rewritten", "replaced", "missing"


@dataclass
class Repair:
    bug: Bug
    verdict: str          # one of REPAIRED ... MISSING
    removed: int = 0      # tokens of the planted definition the student's removed or changed
    added: int = 0        # tokens it adds
    detail: str = ""      # why it is no repair

    @property
    def earns(self):
        """Whether the bug's tests may pay: a repair, or the planted code left as it is (its tests fail)."""
        return self.verdict in (REPAIRED, UNCHANGED)

    def message(self):
        """Why the bug's tests earn nothing, for the failing cell and the feedback page."""
        most_removed, most_added = self.bug.budget
        what = {REWRITTEN: f"rewritten, not repaired: {self.removed} of the colleague's tokens removed or changed and "
                           f"{self.added} added, where a repair removes at most {most_removed} and adds at most "
                           f"{most_added}",
                REPLACED: f"replaced, not repaired: {self.detail}",
                MISSING: "missing: the notebook no longer defines it"}[self.verdict]
        return (f"`{self.bug.replaces}` was {what}. In this lab a bug's tests pay for a repair of the colleague's "
                "code (comments, docstrings and layout do not count), not for code written anew.")


def definition_tokens(code):
    """The tokens of a definition (text or ast node) after parsing: comments, docstrings, layout,
    quotes and redundant parentheses do not count; NEWLINE, INDENT and DEDENT do."""
    node = cells.parse(code) if isinstance(code, str) else cells.parse(ast.unparse(code))
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _docstring_span(n):
            n.body = n.body[1:] or [ast.Pass()]
    marks = {tokenize.NEWLINE: "\\n", tokenize.INDENT: ">", tokenize.DEDENT: "<"}
    return [marks.get(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(ast.unparse(node)).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER, tokenize.ENCODING)]


def edit_size(before, after):
    """(tokens of `before` that `after` does not keep, tokens `after` adds): the two sides of the
    edit, around the longest matching stretches (difflib, no junk heuristic)."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    return len(before) - kept, len(after) - kept


def _parse(source):
    """A cell's code as an ast.Module (IPython magics turned into calls first), or None."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - without IPython, or a cell it cannot read: parse as it is
        pass
    try:
        return cells.parse(source)
    except (SyntaxError, ValueError):
        return None


def _binds(node, name):
    """Whether a top-level statement (not a def/class of `name`) binds `name` anywhere outside function
    bodies: an assignment, an import, a loop or with target, a def or class nested in an if."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if n.name == name and n is not node:
                return True
            if any(isinstance(g, ast.Global) and name in g.names for g in ast.walk(n)):
                return True
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)) and n.id == name:
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.split(".")[0]) == name:
            return True
        stack.extend(ast.iter_child_nodes(n))
    return False


def _patches(node, targets, name):
    """Whether a statement rebinds an attribute of `name` (or a target in `targets`, such as
    DecoderOnlyLM.forward when a locked cell set it to `name`), through assignment, setattr, globals()
    or exec."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            if (isinstance(n.value, ast.Name) and n.value.id == name) or ast.unparse(n) in targets:
                return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            args = [ast.unparse(a) for a in n.args]
            if n.func.id == "setattr" and args and (args[0] == name or any(
                    f"{args[0]}.{a.value}" in targets for a in n.args[1:2] if isinstance(a, ast.Constant))):
                return True
            if n.func.id in ("exec", "eval", "compile") and any(name in a for a in args):
                return True
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and "globals()" in ast.unparse(n.value):
            return True
    return False


def _dead_code(node):
    """Whether a definition has statements after a return or raise in the same block (a rewrite put
    in front of the colleague's code, which then never runs)."""
    for n in ast.walk(node):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and any(isinstance(s, (ast.Return, ast.Raise)) for s in block[:-1]):
                return True
    return False


def judge_repairs(bugs, nb, given=frozenset()):
    """A Repair per bug for the notebook `nb` (a submission): the last definition of the bug's name in the
    student's code (answer cells and cells they added; not tests, not locked cells) against the planted
    one. `given`: the names the colleague's code defines (a repair may call them)."""
    trees, locked = [], []
    for cell in nb.cells:
        if cell.get("cell_type") != "code" or cells.is_test_cell(cell):
            continue
        tree = _parse(cell.source)
        if tree is not None:
            (locked if cells.is_locked(cell) else trees).append(tree)
    defined = {n.name for tree in trees for n in tree.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    outcomes = []
    for bug in bugs:
        name = bug.replaces
        aliases = {ast.unparse(t) for tree in locked for n in tree.body if isinstance(n, ast.Assign)
                   and isinstance(n.value, ast.Name) and n.value.id == name
                   for t in n.targets if isinstance(t, ast.Attribute)}
        last, rebound, patched = None, False, False
        for tree in trees:
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                    last, rebound = node, False
                elif _binds(node, name):
                    rebound = True
                if _patches(node, aliases, name):
                    patched = True
        planted = cells.parse(bug.planted).body[0]
        if last is None:
            outcomes.append(Repair(bug, MISSING))
            continue
        if rebound or patched:
            what = "rebound to something else after its definition" if rebound else "patched after its definition"
            outcomes.append(Repair(bug, REPLACED, detail=f"the name is {what}"))
            continue
        used = {n.id for n in ast.walk(last) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        before = {n.id for n in ast.walk(planted) if isinstance(n, ast.Name)}
        helpers = sorted((used & defined) - before - set(given) - {name})
        if helpers:
            outcomes.append(Repair(bug, REPLACED, detail=f"it calls {', '.join(helpers)}, new code outside the "
                                                          "colleague's definition"))
            continue
        if _dead_code(last) and not _dead_code(planted):
            outcomes.append(Repair(bug, REPLACED, detail="code after a return or raise never runs"))
            continue
        removed, added = edit_size(definition_tokens(planted), definition_tokens(last))
        most_removed, most_added = bug.budget
        verdict = (UNCHANGED if removed == added == 0 else
                   REPAIRED if removed <= most_removed and added <= most_added else REWRITTEN)
        outcomes.append(Repair(bug, verdict, removed, added))
    return outcomes


def given_names(course, lab_id):
    """The top-level names the colleague's code defines."""
    return set(colleague_definitions(cells.read(course.source_notebook(lab_id))))


def with_repairs(verdicts, repairs):
    """The judge's verdicts with each bug that was not repaired failing every test it breaks (its own
    and those they cascade to, as measured: Bug.breaks), the reason first.
    (A verdict is judging.CellVerdict; dataclasses.replace keeps its kind.)"""
    reasons = {test: repair.message() for repair in repairs if not repair.earns for test in repair.bug.breaks}
    out = []
    for verdict in verdicts:
        reason = reasons.get(verdict.grade_id)
        if reason is not None:
            message = reason + (f"\n{verdict.message}" if not verdict.passed and verdict.message else "")
            verdict = replace(verdict, passed=False, message=message)
        out.append(verdict)
    return out


@functools.lru_cache(maxsize=16)
def _cached_lab(root, lab_id, stamp):
    from .course import Course
    course = Course(Path(root))
    if lab_spec(cells.read(course.source_notebook(lab_id))) is None:
        return None
    return lab_bugs(course, lab_id), frozenset(given_names(course, lab_id))


def bugs_if_lab(course, assignment_id):
    """(bugs, the colleague's names) of a lab, None for an assignment; read once per version of the
    source notebook (a grading run asks for every submission)."""
    path = course.source_notebook(assignment_id)
    if not path.exists():
        return None
    return _cached_lab(str(course.root), assignment_id, path.stat().st_mtime_ns)


def student_repairs(course, lab_id, student, bugs=None):
    """The repairs in a graded student's notebook (the autograded copy), or None if there is none."""
    path = store.autograded_notebook(course, student, lab_id)
    if not path.exists():
        return None
    bugs = bugs or lab_bugs(course, lab_id)
    return judge_repairs(bugs, cells.read(path), given_names(course, lab_id))


# ---- after grading: which bugs a student found ----

def bug_outcome(bugs, failed, repairs=None):
    """(found, missed, rewritten, failed tests that belong to no bug) for a student whose failed test
    cells are `failed`: a bug is rewritten when its definition was no repair (`repairs`), missed when a
    test that catches it fails, found otherwise."""
    failed = set(failed)
    not_repaired = {r.bug.name for r in repairs or () if not r.earns}
    rewritten = [bug for bug in bugs if bug.name in not_repaired]
    missed = [bug for bug in bugs if bug not in rewritten and failed & set(bug.tests)]
    found = [bug for bug in bugs if bug not in rewritten and bug not in missed]
    theirs = {test for bug in bugs for test in bug.tests}
    return found, missed, rewritten, sorted(failed - theirs)


def feedback_section(bugs, failed, repairs=None):
    """The HTML block a lab's feedback page opens with: each bug missed (the catalogue's description,
    the test that catches it), each definition rewritten instead of repaired, new failures."""
    found, missed, rewritten, other = bug_outcome(bugs, failed, repairs)
    by_bug = {r.bug.name: r for r in repairs or ()}
    items = "".join(f"<li><code>{html.escape(b.replaces)}</code>: {html.escape(b.description)} "
                    f"(caught by {html.escape(', '.join(b.tests))})</li>" for b in missed)
    parts = [f"<h2>Debugging lab: you repaired {len(found)} of {len(bugs)} bugs</h2>"]
    if missed:
        parts.append(f"<p>Still in your code:</p><ul>{items}</ul>")
    if rewritten:
        lines = "".join(f"<li>{html.escape(by_bug[b.name].message())} The tests it breaks "
                        f"({html.escape(', '.join(b.breaks or b.tests))}) earn nothing.</li>" for b in rewritten)
        parts.append(f"<p>Rewritten instead of repaired:</p><ul>{lines}</ul>")
    if not missed and not rewritten:
        parts.append("<p>Every planted bug is repaired: each test that catches one passes.</p>")
    if other and missed:
        parts.append(f"<p>Also failing: {html.escape(', '.join(other))}. A bug above can break the tests of the code "
                     "that calls it; fix those first.</p>")
    elif other:
        parts.append(f"<p>Failing, though no planted bug is left: {html.escape(', '.join(other))}. A fix that "
                     "broke something else?</p>")
    return ('<div class="debugging-lab" style="border:2px solid #4c72b0;padding:0.5em 1em;margin:1em 0">'
            + "".join(parts) + "</div>")


# ---- what each bug breaks, measured ----

def planted_alone_failures(course, lab_id, source, trace, bugs, progress=False):
    """{bug name: test cells it fails planted alone in the lab's fixed code}, and {bug name: errors}."""
    from tqdm.auto import tqdm

    from .inprocess import run_in_process
    from .judging import judge_notebook
    failing, errors = {}, {}
    for bug in tqdm(bugs, desc=f"bugs {lab_id}", unit="run", disable=not progress):
        records, errors[bug.name] = run_in_process(plant_bugs(course, lab_id, nbformat.from_dict(source), [bug.name]),
                                                   split=trace.split)
        failing[bug.name] = {v.grade_id for v in judge_notebook(trace, records) if not v.passed}
    return failing, errors


def measure_breaks(course, lab_id, progress=True):
    """Record in the lab's source (metadata course.lab.breaks) the test cells each bug fails planted
    alone, in notebook order: a rewrite of its definition loses all of them. Returns them."""
    from .trace import solution_trace
    path = course.source_notebook(lab_id)
    source = cells.read(path)
    bugs = lab_bugs(course, lab_id, source)
    failing, _ = planted_alone_failures(course, lab_id, source, solution_trace(course, lab_id), bugs, progress)
    order = list(cells.test_points(source))
    breaks = {bug.name: sorted(failing[bug.name], key=order.index) for bug in bugs}
    lab_spec(source)["breaks"] = breaks
    nbformat.write(source, str(path))
    return breaks


# ---- the gate's lab checks (grader/gate.py check_lab) ----

def gate_checks(course, lab_id, source, trace, bugs, planted_failures, progress=False):
    """The lab's own checks, as (name, ok, detail):
      (g) each planted bug fails exactly the test cells its catalogue mutant fails in the lab's fixed
          code (`planted_failures`: the cells each bug planted alone fails, from (d)): the colleague's
          hand wrote the catalogue's bug; and those are the cells the lab records as what it breaks
          (course.lab.breaks, which the repair stage fails when the definition was rewritten);
      (h) the tests pay for a repair: the lab's own repair of each bug is within its budget, and the
          assignment's reference and every catalogued alternative of the definition, pasted over it,
          remove more of it than the budget allows (pasting a solution over the lab is a rewrite); the
          findings carry most of the lab's points."""
    from .inprocess import run_in_process
    from .judging import judge_notebook
    problems = []
    for bug in bugs:
        records, errors = run_in_process(source, [((bug.replaces,), bug.mutant_source)], split=trace.split)
        theirs = {v.grade_id for v in judge_notebook(trace, records) if not v.passed}
        ours = planted_failures.get(bug.name, set())
        if theirs != ours or errors:
            problems.append(f"{bug.name}: planted, it fails {sorted(ours)}; the catalogue's mutant fails "
                            f"{sorted(theirs)}" + (f" (a cell errs: {errors[0][1]['message'][:80]})" if errors else ""))
        if set(bug.breaks) != ours:
            problems.append(f"{bug.name}: it breaks {sorted(ours)}, the lab records {sorted(bug.breaks)} (run "
                            f"`python -m grader lab {lab_id} --measure`)")
    first = (f"(g) each bug is its catalogue mutant, and breaks what the lab records ({len(bugs)} bugs)",
             not problems, "; ".join(problems) or "each planted bug fails exactly its mutant's test cells, as recorded")

    assignment = lab_spec(source)["assignment"]
    reference = {}
    for cell in cells.read(course.source_notebook(assignment)).cells:
        if cells.is_answer_cell(cell):
            tree = cells.parse(cells.without_solution_markers(cell.source))
            reference.update({n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))})
    alternatives = load_alternatives(course, assignment)
    problems, margins = [], []
    for bug in bugs:
        planted = definition_tokens(bug.planted)
        (fix_removed, fix_added), (most_removed, most_added) = bug.fix_size, bug.budget
        rewrites = [("the reference", edit_size(planted, definition_tokens(reference[bug.replaces]))[0])]
        for alt in alternatives:
            found = [n for n in cells.parse(alt.definition).body    # as written, named as what it replaces
                     if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == bug.replaces]
            if found:
                rewrites.append((alt.name, edit_size(planted, definition_tokens(found[-1]))[0]))
        nearest = min(size for _, size in rewrites)
        if fix_removed + fix_added == 0:
            problems.append(f"{bug.name}: the lab's repair changes nothing")
        for who, size in rewrites:
            if size <= most_removed:
                problems.append(f"{bug.name}: {who} pasted over {bug.replaces} removes {size} of its tokens, within "
                                f"the repair budget {most_removed}: write the colleague's definition in another hand")
        margins.append(f"{bug.replaces} {fix_removed}+{fix_added}/{most_removed}+{most_added}/{nearest}")
    written = finding_points(source)
    auto = sum(cells.test_points(source).values())
    if written <= auto:
        problems.append(f"the findings carry {written:g} of {written + auto:g} points; most of a lab's points are "
                        "its findings")
    second = ("(h) the tests pay for a repair, not a rewrite (per bug, in tokens: the lab's repair removed+added / "
              "the budget / the fewest a rewrite removes)",
              not problems, "; ".join(problems) or
              f"{', '.join(margins)}; findings {written:g} of {written + auto:g} points")
    return [first, second]


# ---- a new lab ----

def _markdown(text):
    return nbformat.v4.new_markdown_cell(textwrap.dedent(text).strip("\n"))


TOOLS_DEMO = '''\
# Each tool once, on PyTorch's own functions (none of the colleague's code runs here).
x = seeded_randn(3, 4, seed=0)
show_shapes(x=x, weights=torch.softmax(x, dim=-1))
compare(torch.softmax(x, dim=-1), x.exp() / x.exp().sum(dim=-1, keepdim=True), "softmax against its formula")
properties("softmax", rows_sum_to_one=bool(torch.allclose(torch.softmax(x, dim=-1).sum(dim=-1), torch.ones(3))),
           weights_are_non_negative=bool((torch.softmax(x, dim=-1) >= 0).all()))
count_flops(torch.matmul, x, x.T)          # 2 * 3 * 4 * 3 = 72
check_gradients(torch.tanh, x)
print(f"x holds {x.nbytes} bytes: {x.numel()} float32 numbers of {x.element_size()} bytes")'''


def intro(title, assignment_id, count):
    return f"""
        # {title}

        A colleague implemented {assignment_id}. The code below runs without an error, and it is wrong: it
        holds **{count} bugs**, each an error that gives wrong results. **The specification is the task text of
        {assignment_id}** (its notebook, `assignments/{assignment_id}/{assignment_id}.ipynb`): where the
        colleague's code and that text disagree, the text is right. Nothing in this notebook says which
        functions are wrong.

        **How it is graded.**
        - *Your findings* (graded by hand, {FINDING_POINTS} points per bug, most of the lab): for each bug,
          where it is, what goes wrong, the tool output that showed it, your fix, and a number showing its
          effect. Each finding's cell lists what earns its points.
        - *Your repairs* (the assignment's tests, hidden): a bug's tests pay when you **repair** the
          colleague's definition with a small change (a few tokens; comments, docstrings and layout do not
          count). A definition rewritten, replaced or pasted in from elsewhere earns nothing for that bug,
          and a repair that breaks something else loses those tests.

        **Where to run it.** Locally: `jupyter lab` in the course environment. On Colab or Kaggle: upload
        this one file (or open it from GitHub); nothing needs installing: the runtime's torch and
        matplotlib are all it uses. A GPU runtime works but is not needed. *Restart & Run All* before you submit.
        """


TOOLS_GUIDE = """
    None of these knows where the bugs are. Put every function of the colleague's code through the same
    questions: are the shapes, dtypes and devices the task text asks for (`show_shapes`)? do the properties
    the task text states hold (`properties`)? does it agree with a slow, obvious version of the same
    computation (`compare`)? does it cost what it should (`count_flops`, a tensor's `nbytes`)? are its
    gradients right (`check_gradients`)? Start with small inputs you can check by hand, then the edges the
    task text names.
    """


def new_lab(course, lab_id, assignment_id, bugs, title):
    """Write solutions/<lab_id>/<lab_id>.ipynb: a lab debugging `assignment_id` with `bugs` (names in
    mutants/<assignment_id>.py): copies of the assignment's cells, each bugged definition seeded from the
    reference and the mutant (its author then rewrites it in the colleague's hand), the debugging tools,
    a finding per bug and the assignment's tests, hidden. The answer key's symptom, evidence and effect
    are the author's to write (metadata course.lab.key); `sync` keeps the rest current."""
    path = course.source_notebook(lab_id)
    if path.exists():
        raise LabError(f"{path} exists already; edit its metadata's course.lab to change its bugs")
    assignment = cells.read(course.source_notebook(assignment_id))
    spec = {"assignment": assignment_id, "bugs": list(bugs),
            "key": {name: {part: "TODO" for part in KEY_PARTS} for name in bugs}}
    nb = nbformat.v4.new_notebook(metadata={**assignment.metadata, "course": {"lab": spec}})
    originals = {cells.grade_id(c): c for c in assignment.cells if cells.grade_id(c)}
    own = _own_definitions(course, nb, originals)
    copies = [c for c in assignment.cells if cells.grade_id(c) and not cells.is_written_answer(c)]
    code = [copy_of(c, own) for c in copies if not cells.is_test_cell(c)]
    setup = [c for c in code if not cells.is_answer_cell(c) and not _follows_an_answer(c, copies)]
    colleague = [c for c in code if c not in setup]
    tools = nbformat.v4.new_code_cell((Path(__file__).parent / "provided" / "debugging.py").read_text().strip("\n"))
    tools.metadata = {"course": {"provided": "debugging.py"}, "deletable": False, "editable": False,
                      "nbgrader": {"grade": False, "grade_id": "provided_debugging", "locked": True,
                                   "schema_version": 3, "solution": False, "task": False}}
    nb.cells = [_markdown(intro(title, assignment_id, len(bugs))), *setup,
                _markdown("## Your colleague's code\n\nRepair each bug in place; leave the names and signatures as "
                          "they are."),
                *colleague,
                _markdown("## Tools\n\n" + textwrap.dedent(TOOLS_GUIDE).strip("\n")),
                tools, nbformat.v4.new_code_cell(TOOLS_DEMO),
                _markdown("## Your findings (graded by hand)\n\nOne finding per bug, in the order of the functions "
                          "in the notebook, each in the cell below its rubric.")]
    for bug in lab_bugs(course, lab_id, nb):
        nb.cells += [finding_cell(finding_source(bug, assignment_id), bug.number), answer_cell(bug.number)]
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
    lines += [f"  bug_{b.number}  {b.name}: {b.replaces}: {b.description} ({', '.join(b.tests)}; breaks "
              f"{', '.join(b.breaks)}); "
              f"repair removes {b.fix_size[0]} and adds {b.fix_size[1]} tokens, a budget of {b.budget[0]} and "
              f"{b.budget[1]}" for b in bugs]
    return "\n".join(lines)
