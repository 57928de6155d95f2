"""Sample submissions made from the release, the solution and the mutation catalogue, so
the demo and the tests always match the current notebooks: a perfect one, the untouched
release, and buggy ones (a catalogued mutant in place of the student's code)."""

import ast
import functools
import io
import random
import tokenize
from types import SimpleNamespace

import nbformat
from pygments import token
from pygments.lexers import PythonLexer

from . import cells
from .labs import colleague_definitions, debugged_assignment, is_lab, lab_bugs, lab_spec, plant_bugs, with_definitions
from .mutants import load_alternatives, load_catalogue

# the buggy students of the demo, by assignment: mutants whose failing cells are exactly `fails`
DEMO_BUGS = {
    "a1_self_attention": ["fully_masked_rows_nan", "sin_cos_swapped", "context_ignored", "no_length_check"],
    "a2_multihead_masking": ["padding_mask_inverted", "block_norm_first_ignored", "lm_no_length_check"],
    "a3_flops_io": ["lm_head_forgotten", "backward_equals_forward", "layer_norms_forgotten"],
    "a4_kv_cache": ["no_overflow_check", "first_position_logits", "whole_sequence_every_step"],
    "a5_attention_at_scale": ["normaliser_not_rescaled", "query_strips_only", "global_sees_future",
                              "state_not_carried"],
    "a6_real_models": ["ffn_width_rounded_to_nearest", "rotary_positions_from_zero", "halves_across_heads",
                       "meta_k_with_query_heads"],
    "a7_flash_attention_triton": ["causal_end_in_key_blocks", "delta_forgotten", "float16_accumulator",
                                  "gradients_swapped"],
}
LAB_DEMO_MISSES = 2   # a lab's demo students who left one bug in, for its first bugs


def release_notebook(course, assignment_id):
    return cells.read(course.release_notebook(assignment_id))


def perfect_submission(course, assignment_id):
    """The release with every solution cell answered as the reference solution does (in a debugging
    lab: every bug repaired as the lab's own fix regions repair it)."""
    if is_lab(course, assignment_id):
        return lab_submission(course, assignment_id, [])
    source = cells.read(course.source_notebook(assignment_id))
    answers = {cells.grade_id(c): cells.without_solution_markers(c.source) for c in source.cells
               if cells.nbgrader_meta(c).get("solution")}
    nb = release_notebook(course, assignment_id)
    for cell in nb.cells:
        gid = cells.grade_id(cell)
        if cells.nbgrader_meta(cell).get("solution") and gid in answers:
            cell.source = answers[gid]
    return nb


def buggy_submission(course, assignment_id, mutant_name):
    """A perfect submission whose cell defining the mutated name ends with the mutant, which
    rebinds that name (the cell's other definitions stay, exactly as in `grader check`)."""
    mutant = next((m for m in load_catalogue(course, assignment_id) if m.name == mutant_name), None)
    if mutant is None:
        raise KeyError(f"no mutant {mutant_name!r} in mutants/{assignment_id}.py")
    nb = perfect_submission(course, assignment_id)
    for cell in nb.cells:
        if cell.cell_type == "code" and cells.nbgrader_meta(cell).get("solution"):
            if set(mutant.replaces) & (cells.defined_names(cell.source) or set()):
                # plain code: a cell keeps its own source for inspect (a Triton kernel's @triton.jit reads
                # it), and the exec() of `mutant.source` would read as hidden code to the forbidden-calls check
                cell.source = cell.source + "\n\n" + mutant.code
                return nb, mutant
    raise ValueError(f"no solution cell defines {mutant.replaces}")


def lab_submission(course, lab_id, left):
    """A debugging lab's release with every bug repaired as the lab's own fix regions repair it, but
    for the bugs named in `left`: a student who found and repaired all the others (`left` empty: the
    real fixer, minimal repairs and full marks)."""
    return plant_bugs(course, lab_id, release_notebook(course, lab_id), left)


def pasted_solution(course, lab_id):
    """A lab's release with the assignment's reference answer cells pasted over the colleague's code:
    a student who pastes a correct solution instead of debugging (its bugged definitions are rewrites)."""
    source = cells.read(course.source_notebook(lab_id))
    assignment = cells.read(course.source_notebook(lab_spec(source)["assignment"]))
    reference = {cells.grade_id(c): c.source for c in assignment.cells if cells.is_answer_cell(c)}
    copies = {cells.grade_id(c): c.metadata.get("course", {}).get("lab_copy") for c in source.cells}
    nb = release_notebook(course, lab_id)
    for cell in nb.cells:
        original = reference.get(copies.get(cells.grade_id(cell)))
        if cells.is_answer_cell(cell) and original is not None:
            cell.source = cells.without_solution_markers(original).rstrip("\n")
    return nb


def rewritten_bugs(course, lab_id):
    """A lab's release with each bugged definition replaced by a correct alternative from
    alternatives/<assignment>.py (the first that replaces that name alone): a student who rewrote every
    function they suspected instead of repairing it. Returns (notebook, {definition: alternative})."""
    assignment = lab_spec(cells.read(course.source_notebook(lab_id)))["assignment"]
    alternatives = load_alternatives(course, assignment)
    chosen = {}
    for bug in lab_bugs(course, lab_id):
        alternative = next((a for a in alternatives if a.replaces == (bug.replaces,)), None)
        if alternative is not None:
            chosen[bug.replaces] = alternative
    nb = release_notebook(course, lab_id)
    given = set().union(*(_top_level_names(c.source) for c in nb.cells
                          if c.cell_type == "code" and not cells.is_answer_cell(c)))
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            defined = colleague_definitions_of(cell)
            here = {name: a.definition for name, a in chosen.items() if name in defined}
            if here:   # each alternative as the catalogue writes it, after the imports and helpers it uses
                needs = _needs(course.alternatives_dir / f"{assignment}.py", list(here.values()), given | set(defined))
                cell.source = "".join(f"{text}\n\n" for text in needs) + with_definitions(cell.source, here)
    return nb, {name: a.name for name, a in chosen.items()}


def colleague_definitions_of(cell):
    """The top-level definitions of one answer cell."""
    return colleague_definitions(nbformat.v4.new_notebook(cells=[cell]))


# a lab's demo students besides the real fixer and the untouched release (grader/demo.py checks each)
LAB_PASTED, LAB_REWRITTEN, LAB_FIXER = "pasted_solution", "rewrote_bugged_definitions", "real_fixer"


def write_demo_submissions(course, assignment_id, folder):
    """Write the demo's students into folder/<student>.ipynb; returns {student: expectation}."""
    folder.mkdir(parents=True, exist_ok=True)
    expectations = {"perfect": "full marks", "untouched_release": "zero"}
    nbformat.write(release_notebook(course, assignment_id), str(folder / "untouched_release.ipynb"))
    if is_lab(course, assignment_id):
        expectations = {LAB_FIXER: "every bug repaired with the lab's own minimal fixes: full marks",
                        "untouched_release": "every bug missed",
                        LAB_PASTED: "the assignment's solution pasted over the lab: no bug's tests pay",
                        LAB_REWRITTEN: "an alternative in place of each bugged definition: no bug's tests pay"}
        nbformat.write(lab_submission(course, assignment_id, []), str(folder / f"{LAB_FIXER}.ipynb"))
        nbformat.write(pasted_solution(course, assignment_id), str(folder / f"{LAB_PASTED}.ipynb"))
        nbformat.write(rewritten_bugs(course, assignment_id)[0], str(folder / f"{LAB_REWRITTEN}.ipynb"))
        for bug in lab_bugs(course, assignment_id)[:LAB_DEMO_MISSES]:   # fixed every bug but one
            nbformat.write(lab_submission(course, assignment_id, [bug.name]), str(folder / f"missed_{bug.name}.ipynb"))
            expectations[f"missed_{bug.name}"] = f"misses {bug.name} only"
        return expectations
    nbformat.write(perfect_submission(course, assignment_id), str(folder / "perfect.ipynb"))
    for name in DEMO_BUGS.get(assignment_id, []):
        nb, mutant = buggy_submission(course, assignment_id, name)
        nbformat.write(nb, str(folder / f"bug_{name}.ipynb"))
        expectations[f"bug_{name}"] = mutant.bug
    return expectations


# ---- submissions for the similarity check (grader/similarity.py): independent work and disguised copies ----

def _definition(source, name):
    """The text of the top-level definition `name` in `source` (decorators included)."""
    lines = source.splitlines(keepends=True)
    for node in cells.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return _node_text(lines, node)
    raise KeyError(name)


def _node_text(lines, node):
    """The text of a top-level definition's node, decorators included, from its source's lines."""
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    return "".join(lines[start:node.end_lineno])


def implementations(course, assignment_id):
    """{definition: [its implementations]} for each definition written in an answer cell that the
    catalogue of alternatives covers: None stands for the reference solution's, then each
    Alternative. A debugging lab's are its bugged definitions with the debugged assignment's
    alternatives only (the fixed reference is what every student is expected to write)."""
    if is_lab(course, assignment_id):
        bugged = {bug.replaces for bug in lab_bugs(course, assignment_id)}
        found = {name: [] for name in sorted(bugged)}
        for alt in load_alternatives(course, debugged_assignment(course, assignment_id)):
            if alt.replaces[0] in found:
                found[alt.replaces[0]].append(alt)
        return found
    found = {name: [None] for cell in cells.read(course.source_notebook(assignment_id)).cells
             if cells.is_answer_cell(cell) for name in (cells.defined_names(cell.source) or ())}
    for alt in load_alternatives(course, assignment_id):
        if alt.replaces[0] in found:
            found[alt.replaces[0]].append(alt)
    return found


def submission_with(course, assignment_id, chosen):
    """The perfect submission with some definitions written otherwise: `chosen` maps a name to an
    Alternative (its definition as the catalogue writes it, with the reference's docstrings, and
    above the cell's code what it needs of the catalogue's imports and private helpers) or to
    "stub" (left as the release gives it: unanswered; a helper of the reference's own that the release
    does not define is left out)."""
    nb = perfect_submission(course, assignment_id)
    release = release_notebook(course, assignment_id)
    stubs, given = {}, set()
    for cell in release.cells:
        if cells.is_answer_cell(cell):
            for name in cells.defined_names(cell.source) or ():
                stubs[name] = _definition(cell.source, name)
        elif cell.cell_type == "code":
            given |= _top_level_names(cell.source)
    catalogue = course.alternatives_dir / f"{_catalogue_of(course, assignment_id)}.py"
    for cell in nb.cells:
        if not cells.is_answer_cell(cell):
            continue
        here = cells.defined_names(cell.source) or set()
        left_out = {name for name, how in chosen.items() if how == "stub" and name in here and name not in stubs}
        replacements = [SimpleNamespace(replaces=name, definition=stubs[name] if how == "stub" else how.definition)
                        for name, how in chosen.items() if name in here and name not in left_out]
        if left_out:
            cell.source = _without_definitions(cell.source, left_out)
        if replacements:
            needs = _needs(catalogue, [r.definition for r in replacements if r.definition not in stubs.values()],
                           given | here)
            cell.source = "".join(f"{text}\n\n" for text in needs) + with_definitions(
                cell.source, {r.replaces: r.definition for r in replacements})
    return nb


def _without_definitions(source, names):
    """`source` without its top-level definitions of `names` (decorators included)."""
    lines = source.splitlines(keepends=True)
    for node in reversed(cells.parse(source).body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            lines[start:node.end_lineno] = []
    return "".join(lines).rstrip("\n")


def _catalogue_of(course, assignment_id):
    return debugged_assignment(course, assignment_id) if is_lab(course, assignment_id) else assignment_id


def _needs(catalogue, definitions, defined):
    """What `definitions` use of a catalogue's imports and private helpers (and what those helpers
    use in turn) that `defined` does not hold: the text of each, imports first."""
    provides = _catalogue_provides(catalogue.read_text())
    needed, todo = [], list(definitions)
    while todo:
        used = {n.id for n in ast.walk(cells.parse(todo.pop())) if isinstance(n, ast.Name)}
        for name in sorted(used - defined):
            if name in provides and provides[name] not in needed:
                needed.append(provides[name])
                todo.append(provides[name])
    return sorted(needed, key=lambda code: not code.startswith(("import ", "from ")))


@functools.lru_cache(maxsize=16)
def _catalogue_provides(text):
    """{name: its text} for a catalogue's imports (but the grader's) and private helpers; read once per
    content of the catalogue, as the samples of one assignment ask for it again and again."""
    lines = text.splitlines(keepends=True)
    provides = {}
    for node in cells.parse(text).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and "grader" not in (getattr(node, "module", "") or ""):
            for alias in node.names:
                provides[(alias.asname or alias.name).split(".")[0]] = ast.get_source_segment(text, node)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.startswith("_"):
            provides[node.name] = _node_text(lines, node).rstrip("\n")    # a kernel keeps its @triton.jit
    return provides


def independent_submissions(course, assignment_id):
    """Submissions that share no implementation of any definition: the i-th writes every
    definition the catalogue covers with its i-th implementation (the reference's first, in an
    assignment), as many as the definition with the fewest implementations allows. A definition
    with only the reference is answered by the first submission alone (the others leave its stub),
    so that nothing in any two of them is the same code by construction."""
    found = implementations(course, assignment_id)
    count = min((len(ways) for ways in found.values() if len(ways) > 1), default=1)
    students = []
    for index in range(count):
        chosen = {}
        for name, ways in found.items():
            if index >= len(ways):
                chosen[name] = "stub"
            elif ways[index] is not None:
                chosen[name] = ways[index]
        students.append(submission_with(course, assignment_id, chosen))
    return students


_NEW_NAMES = ("tmp", "val", "res", "buf", "acc", "part", "item", "thing", "data", "arr", "mat", "vec")
_NEW_COMMENTS = ("my approach", "this part works", "TODO tidy up", "from the lecture notes", "see slides",
                 "careful with shapes here", "checked by hand")


def disguised_copy(course, assignment_id, nb, seed=0):
    """A copy of the notebook `nb` as a plagiarist disguises it, in every answer cell: local
    variables renamed (one new name each, throughout the notebook), each run of definitions and of
    a class's methods in reverse order, every comment replaced and new comment lines put in. The
    code still runs as before: parameters, attributes, keyword arguments and the names the
    release defines keep their names."""
    rng = random.Random(seed)
    copy = nbformat.from_dict(nb)
    answers = [cell for cell in copy.cells if cells.is_answer_cell(cell)]
    given = set()
    for cell in release_notebook(course, assignment_id).cells:
        if cell.cell_type == "code":
            given |= _top_level_names(cell.source)
    locals_, parameters = set(), set()
    for cell in answers:
        found_locals, found_parameters = _local_names(cell.source)
        locals_ |= found_locals
        parameters |= found_parameters
    renamed = sorted(locals_ - parameters - given)
    mapping = {name: f"{rng.choice(_NEW_NAMES)}_{i}" for i, name in enumerate(renamed)}
    for cell in answers:
        source = _renamed(cell.source, mapping, rng)
        source = _reordered(source)
        cell.source = _commented(source, rng)
    return copy


def _top_level_names(source):
    try:
        tree = cells.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names


def _local_names(source):
    """(names assigned inside functions, every function's parameters) of a cell."""
    assigned, parameters = set(), set()
    for function in ast.walk(cells.parse(source)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            arguments = function.args
            parameters |= {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
            parameters |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
            assigned |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return assigned, parameters


def _renamed(source, mapping, rng):
    """The cell with each name of `mapping` renamed (not after a '.', nor as a keyword argument)
    and every comment replaced."""
    tokens = [(kind, text) for _, kind, text in PythonLexer().get_tokens_unprocessed(source)]
    significant = [i for i, (kind, text) in enumerate(tokens) if kind not in token.Text and kind not in token.Comment]
    before = {i: (tokens[significant[n - 1]][1] if n else "") for n, i in enumerate(significant)}
    after = {i: (tokens[significant[n + 1]][1] if n + 1 < len(significant) else "") for n, i in enumerate(significant)}
    depth, out = 0, []
    for i, (kind, text) in enumerate(tokens):
        if text in "([{" and kind in token.Punctuation:
            depth += 1
        elif text in ")]}" and kind in token.Punctuation:
            depth -= 1
        if kind in token.Name and text in mapping and before.get(i) != "." and not (depth and after.get(i) == "="):
            text = mapping[text]
        elif kind in token.Comment:
            text = "# " + rng.choice(_NEW_COMMENTS)
        out.append(text)
    return "".join(out)


def _reordered(source):
    """Each run of consecutive top-level definitions, and of a class's consecutive methods, in
    reverse order (what lies between them stays where it is)."""
    try:
        tree = cells.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    edits = []        # (first line, last line, new text), 0-based, end exclusive

    def spans(body):
        run = []
        for node in body + [None]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                run.append((min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1, node.end_lineno))
                continue
            if len(run) > 1:
                blocks = ["".join(lines[s:e]) for s, e in run]
                gaps = ["".join(lines[run[k][1]:run[k + 1][0]]) for k in range(len(run) - 1)]
                text = "".join(block + gap for block, gap in zip(reversed(blocks), gaps + [""]))
                edits.append((run[0][0], run[-1][1], text))
            run = []

    spans(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not any(s <= node.lineno - 1 < e for s, e, _ in edits):
            spans(node.body)
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    return "".join(lines).rstrip("\n")


def _commented(source, rng, share=0.3):
    """New comment lines, at the indentation of the statement they stand above, before about
    `share` of the statements that begin a line."""
    starts, expect = set(), True      # the lines where a statement begins
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NEWLINE:
                expect = True
            elif tok.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT) and expect:
                starts.add(tok.start[0])
                expect = False
    except (tokenize.TokenError, SyntaxError):
        return source
    out = []
    for number, line in enumerate(source.splitlines(), start=1):
        if number in starts and rng.random() < share:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}# {rng.choice(_NEW_COMMENTS)}")
        out.append(line)
    return "\n".join(out)
