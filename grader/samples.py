"""Sample submissions made from the release, the solution and the mutation catalogue, so
the demo and the tests always match the current notebooks: a perfect one, the untouched
release, and buggy ones (a catalogued mutant in place of the student's code)."""

import nbformat

from . import cells
from .labs import is_lab, lab_bugs, plant_bugs
from .mutants import load_catalogue

# the buggy students of the demo, by assignment: mutants whose failing cells are exactly `fails`
DEMO_BUGS = {
    "a1_self_attention": ["fully_masked_rows_nan", "sin_cos_swapped", "context_ignored", "no_length_check"],
    "a2_multihead_masking": ["padding_mask_inverted", "block_norm_first_ignored", "lm_no_length_check"],
    "a3_flops_io": ["lm_head_forgotten", "backward_equals_forward", "layer_norms_forgotten"],
    "a4_kv_cache": ["no_overflow_check", "first_position_logits", "whole_sequence_every_step"],
    "a5_attention_at_scale": ["normaliser_not_rescaled", "query_strips_only", "global_sees_future",
                              "state_not_carried"],
    "a6_real_models": ["c_attn_kqv_order", "rotary_offset_ignored", "repeat_kv_tiled", "llama_lm_head_copied"],
    "a7_flash_attention_triton": ["causal_end_in_key_blocks", "delta_forgotten", "float16_accumulator",
                                  "gradients_swapped"],
}
LAB_DEMO_MISSES = 2   # a lab's demo students: one per bug left in, for the first bugs


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
    """A debugging lab's perfect submission with the bugs named in `left` still in its code: a
    student who found and fixed all the others."""
    return plant_bugs(course, lab_id, perfect_submission(course, lab_id), left)


def write_demo_submissions(course, assignment_id, folder):
    """Write the demo's students into folder/<student>.ipynb; returns {student: expectation}."""
    folder.mkdir(parents=True, exist_ok=True)
    expectations = {"perfect": "full marks", "untouched_release": "zero"}
    nbformat.write(perfect_submission(course, assignment_id), str(folder / "perfect.ipynb"))
    nbformat.write(release_notebook(course, assignment_id), str(folder / "untouched_release.ipynb"))
    if is_lab(course, assignment_id):   # a lab's students fixed every bug but one (the first two bugs)
        expectations["untouched_release"] = "every bug missed"
        for bug in lab_bugs(course, assignment_id)[:LAB_DEMO_MISSES]:
            nbformat.write(lab_submission(course, assignment_id, [bug.name]), str(folder / f"missed_{bug.name}.ipynb"))
            expectations[f"missed_{bug.name}"] = f"misses {bug.name} only"
        return expectations
    for name in DEMO_BUGS.get(assignment_id, []):
        nb, mutant = buggy_submission(course, assignment_id, name)
        nbformat.write(nb, str(folder / f"bug_{name}.ipynb"))
        expectations[f"bug_{name}"] = mutant.bug
    return expectations
