"""The similarity check (`python -m grader similarity ID`) on a synthetic class: students whose
every graded definition is, at random, the reference's or one of the catalogue's alternatives
(alternatives/<id>.py), and disguised copies of some of them (local variables renamed, definitions
and methods reordered, comments replaced and added: grader/samples.py). The notebooks are written
where autograde leaves graded ones, without grading them. Not a test: it prints figures for
docs/results.md.

    python benchmarks/similarity_benchmark.py                      # 100 submissions of a1, 10 of them copies
    python benchmarks/similarity_benchmark.py --students 200 --copies 20 --assignment a2_multihead_masking
    python benchmarks/similarity_benchmark.py --margins            # every assignment and lab: how far apart

--margins: for every assignment and lab, the submissions that share no implementation of any
definition (grader.samples.independent_submissions) and a disguised copy of each: the highest
similarity between two independent ones, and the lowest between a copy and its original.
"""
import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from grader import samples  # noqa: E402
from grader.course import Course  # noqa: E402
from grader.similarity import check_similarity  # noqa: E402
from support.similarity import write_graded  # noqa: E402

COURSE = Course(REPO)


def synthetic_class(course, assignment_id, students, copies, seed):
    """({name: notebook}, {copy: original}): `students - copies` students each writing every
    definition at random with one of its implementations, and `copies` disguised copies of some
    of them."""
    rng = random.Random(seed)
    ways = samples.implementations(course, assignment_id)
    notebooks, copied = {}, {}
    for index in range(students - copies):
        chosen = {name: rng.choice(options) for name, options in ways.items() if options}
        notebooks[f"student{index:03d}"] = samples.submission_with(
            course, assignment_id, {name: how for name, how in chosen.items() if how is not None})
    originals = rng.sample(sorted(notebooks), copies)
    for index, original in enumerate(originals):
        name = f"copier{index:03d}"
        notebooks[name] = samples.disguised_copy(course, assignment_id, notebooks[original], seed=seed + index)
        copied[name] = original
    return notebooks, copied


def margins():
    print("| assignment | independent submissions | highest similarity between two of them | lowest similarity "
          "of a copy to its original (its own tokens) | copies flagged |")
    print("|---|---|---|---|---|")
    for assignment_id in COURSE.assignment_ids():
        with tempfile.TemporaryDirectory() as folder:
            course = COURSE.with_grading_dir(Path(folder) / "course")
            originals = samples.independent_submissions(course, assignment_id)
            notebooks = {f"own{i}": nb for i, nb in enumerate(originals)}
            notebooks.update({f"copy{i}": samples.disguised_copy(course, assignment_id, nb, seed=i)
                              for i, nb in enumerate(originals)})
            write_graded(course, assignment_id, notebooks)
            result = check_similarity(course, assignment_id)
            tokens = {w.name: w.tokens for w in result.works}
            apart = [p for p in result.pairs if p.a.name[-1] != p.b.name[-1]]
            copies = [p for p in result.pairs if p.a.name[-1] == p.b.name[-1]]
            worst = max(apart, key=lambda p: p.similarity)
            closest = min(copies, key=lambda p: p.similarity)
            own = tokens[next(n for n in (closest.a.name, closest.b.name) if n.startswith("own"))]
            caught = sum(p in result.flagged for p in copies)
            print(f"| {assignment_id} | {len(originals)} | {worst.similarity:.0f}% ({worst.tokens} tokens) | "
                  f"{closest.similarity:.0f}% ({own}) | {caught} of {len(copies)} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", default="a1_self_attention")
    parser.add_argument("--students", type=int, default=100, help="submissions in all (default 100)")
    parser.add_argument("--copies", type=int, default=10, help="of which disguised copies (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of the check, median reported (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--margins", action="store_true", help="every assignment's independent submissions and "
                        "their copies, instead")
    args = parser.parse_args()
    if args.margins:
        return margins()
    with tempfile.TemporaryDirectory() as folder:
        course = COURSE.with_grading_dir(Path(folder) / "course")
        notebooks, copied = synthetic_class(course, args.assignment, args.students, args.copies, args.seed)
        write_graded(course, args.assignment, notebooks)
        walls, cpus = [], []
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            result = check_similarity(course, args.assignment)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        flagged = {frozenset((p.a.name, p.b.name)) for p in result.flagged}
        caught = sum(frozenset((copy, original)) in flagged for copy, original in copied.items())
        others = len(flagged) - caught
        print(f"{args.assignment}: {len(result.works)} submissions compared, {len(result.pairs)} pairs, "
              f"{len(result.not_compared)} not compared")
        print(f"check (reading the notebooks, fingerprints, every pair, HTML and CSV): median of {args.repeats} "
              f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} CPU-s "
              f"(runs: {', '.join(f'{w:.2f}' for w in walls)} s)")
        print(f"flagged at {result.threshold:g}%: {len(flagged)} pairs; copies caught {caught} of {len(copied)}; "
              f"{others} other pairs (students who drew the same implementation of most definitions)")
        print(f"HTML {result.html_path.stat().st_size / 1e6:.2f} MB, CSV {result.csv_path.stat().st_size / 1e3:.1f} kB")


if __name__ == "__main__":
    main()
