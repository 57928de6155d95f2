"""The margins of a5's memory tests: the largest tensor that the solution, every correct alternative and
every catalogued mutant create in the calls each memory test measures, against that test's bound. Not a
test (the quality gate proves pass and fail); it prints the figures in docs/results.md.

    python benchmarks/a5_memory_margins.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import cells
from grader.course import Course
from grader.mutants import load_alternatives, load_catalogue

ASSIGNMENT = "a5_attention_at_scale"


def notebook_namespace(course):
    """The solution's setup, provided and answer cells run in one namespace."""
    namespace = {}
    for cell in cells.read(course.source_notebook(ASSIGNMENT)).cells:
        grade_id = cells.grade_id(cell)
        runs_here = grade_id == "setup" or cells.provided_file(cell) or cells.is_answer_cell(cell)
        if cell.cell_type == "code" and runs_here:
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)
    return namespace


def candidates(course, namespace, name):
    """(label, function) for the solution, the alternatives and the mutants of `name`."""
    found = [("solution", namespace[name])]
    entries = [(a.name, a.replaces, a.source) for a in load_alternatives(course, ASSIGNMENT)]
    entries += [(f"{m.name} (mutant)", m.replaces, m.source) for m in load_catalogue(course, ASSIGNMENT)]
    for label, replaces, source in entries:
        if replaces[0] == name:
            scope = dict(namespace)
            exec(compile(source, f"<{label}>", "exec"), scope)
            found.append((label, scope[name]))
    return found


def broadcast_gqa(q, k, v, mask=None):
    """Grouped-query attention by a broadcasting matmul, (B, G, H/G, Lq, d) @ (B, G, 1, d, Lk): torch.matmul
    expands the keys to the full batch shape and copies them."""
    batch, heads, len_q, d = q.shape
    groups, len_k = k.shape[1], k.shape[2]
    scores = q.view(batch, groups, heads // groups, len_q, d) @ k[:, :, None].transpose(-2, -1) / d ** 0.5
    if mask is not None:
        keep = torch.broadcast_to(mask, (batch, heads, len_q, len_k)).view(batch, groups, heads // groups, len_q, len_k)
        scores = scores.masked_fill(~keep, float("-inf"))
    return (scores.softmax(-1) @ v[:, :, None]).reshape(batch, heads, len_q, v.shape[-1])


def worst_ratio(function, calls, largest):
    """The largest tensor over the bound, worst over the calls; nan where the function raises."""
    worst = 0.0
    for args, kwargs, bound in calls:
        try:
            worst = max(worst, largest(function, *args, **kwargs)[1] / bound)
        except Exception:  # noqa: BLE001 - a mutant that raises has no figure
            return float("nan")
    return worst


def main():
    course = Course.find()
    namespace = notebook_namespace(course)
    largest, randn = namespace["largest_new_tensor"], namespace["seeded_randn"]

    flash_calls = []
    flash_shapes = [(1, 2, 64, 64, 16, False, 10), (1, 1, 64, 64, 16, True, 300), (2, 2, 48, 256, 32, True, 301),
                    (2, 2, 100, 100, 32, False, 302), (2, 2, 1, 100, 16, True, 303)]   # the test cell's calls
    for batch, heads, len_q, len_k, block, causal, seed in flash_shapes:
        q = randn(batch, heads, len_q, 4, seed=seed)
        k, v = randn(batch, heads, len_k, 4, seed=seed + 1), randn(batch, heads, len_k, 4, seed=seed + 2)
        bound = 2 * max(q.numel(), k.numel(), batch * heads * block * block)
        flash_calls.append(((q, k, v), {"causal": causal, "block_size": block}, bound))
    print("flash_attention: largest tensor / bound (2 x the largest of q, k, v, the output and one tile)")
    for label, function in candidates(course, namespace, "flash_attention"):
        print(f"  {label:40s} {worst_ratio(function, flash_calls, largest):6.2f}")

    gqa_calls = []
    for batch, heads, groups, len_k, d, seed, masked in [(2, 8, 2, 128, 16, 90, False), (1, 16, 4, 200, 8, 1100, True),
                                                         (2, 8, 1, 96, 8, 1101, True)]:
        q = randn(batch, heads, 1, d, seed=seed)
        k, v = randn(batch, groups, len_k, d, seed=seed + 1), randn(batch, groups, len_k, d, seed=seed + 2)
        mask = torch.ones(batch, 1, 1, len_k, dtype=torch.bool) if masked else None
        gqa_calls.append(((q, k, v), {"mask": mask}, 2 * max(q.numel(), k.numel(), batch * heads * len_k)))
    print("grouped_query_attention: largest tensor / bound (2 x the largest of q, k, v, the output and the scores)")
    gqa_forms = [*candidates(course, namespace, "grouped_query_attention"), ("broadcasting @", broadcast_gqa)]
    for label, function in gqa_forms:
        print(f"  {label:40s} {worst_ratio(function, gqa_calls, largest):6.2f}")

    configs = [(64, 16, 2), (32, 8, 0), (24, 4, 4), (128, 32, 1)]
    print("sliding_window_attention: growth of the largest tensor from L to 4 L (bound 8)")
    print("  " + " " * 40 + "".join(f"{f'L={n},w={w},g={g}':>16}" for n, w, g in configs))
    for label, function in candidates(course, namespace, "sliding_window_attention"):
        row = []
        for length, window, n_global in configs:
            def at(n):
                q, k, v = (randn(1, 2, n, 8, seed=500 + i) for i in range(3))
                return largest(function, q, k, v, window, n_global)[1]
            row.append(at(4 * length) / at(length))
        print(f"  {label:40s}" + "".join(f"{ratio:16.2f}" for ratio in row))


if __name__ == "__main__":
    main()
