"""Sample submissions made from the release, the solution and the mutation catalogue, so
the demo and the tests always match the current notebooks: a perfect one, the untouched
release, and buggy ones (a catalogued mutant in place of the student's code)."""

import nbformat

from . import cells
from .labs import colleague_definitions, is_lab, lab_bugs, lab_spec, plant_bugs, with_definitions
from .mutants import load_alternatives, load_catalogue

# the buggy students of the demo, by assignment: mutants whose failing cells are exactly `fails`
DEMO_BUGS = {
    "a1_self_attention": ["fully_masked_rows_nan", "sin_cos_swapped", "context_ignored", "no_length_check"],
    "a2_multihead_masking": ["padding_mask_inverted", "block_norm_first_ignored", "lm_no_length_check"],
    "a3_flops_io": ["lm_head_forgotten", "backward_equals_forward", "layer_norms_forgotten"],
    "a4_kv_cache": ["no_overflow_check", "first_position_logits", "whole_sequence_every_step"],
    "a5_attention_at_scale": ["normaliser_not_rescaled", "query_strips_only", "global_sees_future",
                              "state_not_carried"],
    "a6_real_models": ["c_attn_kqv_order", "rotary_offset_ignored", "repeat_kv_tiled", "llama_lm_head_copied"],
}
LAB_DEMO_MISSES = 2   # a lab's demo students who left one bug in, for its first bugs


def release_notebook(course, assignment_id):
    return cells.read(course.release_notebook(assignment_id))


def perfect_submission(course, assignment_id):
    """The release with every solution cell answered as the reference solution does."""
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
                cell.source = cell.source + "\n\n" + mutant.source
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
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            here = {name: a.source for name, a in chosen.items() if name in colleague_definitions_of(cell)}
            if here:
                cell.source = with_definitions(cell.source, here)
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
