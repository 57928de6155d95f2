"""CPU of one quality-gate run: the solution notebook executed in this process as the gate runs a
mutant or an alternative (grader/inprocess.py run_in_process, RNG perturbation on), median of
`--rounds`. Each round runs the notebook twice, one after the other: with the FLOP counting the
grader installs (grader/runtime/record.py fast_flop_counter) and with torch's own
FlopCounterMode dispatch and module tracker, so a drift of a shared machine hits both alike.

    OMP_NUM_THREADS=1 python benchmarks/gate_run_cost.py a4_kv_cache debug_a4 --rounds 5

Both runs record the same answers (tests/test_speed_paths.py); the script says so for every round.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from torch.utils import _pytree, module_tracker
    from torch.utils.flop_counter import _FlopCounterMode

    import grader.inprocess as inprocess
    from grader import cells
    from grader.course import Course
    from grader.runtime.record import fast_flop_counter
    from grader.split import split_notebook

    fast_flop_counter()
    graders = (_FlopCounterMode.__dict__["__torch_dispatch__"], module_tracker.tree_flatten)
    if not getattr(graders[0], "course_fast_path", False):
        sys.exit("the grader's FLOP counting is not installed on this torch: nothing to compare")
    torchs = (graders[0].replaces, _pytree.tree_flatten)
    inprocess.fast_flop_counter = lambda: None     # each run below sets the counting it measures

    def run(counting, nb, split, seed):
        _FlopCounterMode.__torch_dispatch__, module_tracker.tree_flatten = counting
        started = time.process_time()
        records, errors = inprocess.run_in_process(nb, split=split, rng_seed=seed)
        return time.process_time() - started, repr((records, errors))

    course = Course(ROOT)
    for aid in args.ids:
        nb = cells.read(course.source_notebook(aid))
        split = split_notebook(nb)
        run(graders, nb, split, 11)                 # imports and first-call costs, outside the figures
        times, same = {"grader": [], "torch": []}, True
        for index in range(args.rounds):
            for name, counting in (("torch", torchs), ("grader", graders)):
                seconds, answers = run(counting, nb, split, 23 + index)
                times[name].append(seconds)
                if name == "torch":
                    expected = answers
                else:
                    same &= answers == expected
        before, after = statistics.median(times["torch"]), statistics.median(times["grader"])
        print(f"{aid}: torch's FlopCounterMode {before:.3f} CPU-s, the grader's {after:.3f} CPU-s a run "
              f"(median of {args.rounds}; {100 * (1 - after / before):.0f}% less); "
              f"answers {'the same' if same else 'DIFFERENT (a timed test?)'}", flush=True)


if __name__ == "__main__":
    main()
