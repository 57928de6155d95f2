"""The dual of the mutation catalogue: what makes a test take points from correct work, and the
tools that catch it. The catalogues themselves run in the quality gate (tests/test_gate.py)."""
import torch
import torch.nn as nn
from nbformat.v4 import new_code_cell, new_notebook

from grader.inprocess import run_in_process
from grader.judging import Trace, judge_notebook
from grader.mutants import load_alternatives
from grader.provided import checks_source
from grader.split import split_notebook
from support import ASSIGNMENT_IDS

NO_TRACE = Trace({}, [])   # for a gate whose runs and judge are faked


def _cell(source, **nbgrader):
    return new_code_cell(source, metadata={"nbgrader": nbgrader} if nbgrader else {})


def _notebook(test_source):
    """A tiny assignment: the check helpers, one answer cell, one graded test cell."""
    return new_notebook(cells=[
        _cell("import torch\ntorch.manual_seed(0)"),
        _cell(checks_source()),
        _cell("def double(x):\n    return 2 * x", solution=True, grade=False, grade_id="answer"),
        _cell(test_source, grade=True, solution=False, grade_id="test_double", points=1),
    ])


def _verdicts(nb, rng_seed):
    split = split_notebook(nb)
    records, errors = run_in_process(nb, keep_expected=True, split=split)
    trace = Trace(records, errors, split)
    student, _ = run_in_process(nb, rng_seed=rng_seed, split=split)
    return judge_notebook(trace, student)


def test_a_test_fed_by_the_global_generator_is_flagged():
    # The expected value comes from the reference's run; a student whose code drew one more random
    # number gets another x, and loses the point although `double` is right.
    nb = _notebook("x = torch.randn(3)\ncheck_close(double(x), 2 * x, 'double of x')")
    assert all(v.passed for v in _verdicts(nb, rng_seed=None))
    assert not any(v.passed for v in _verdicts(nb, rng_seed=11))


def test_a_test_with_its_own_seed_holds_under_every_perturbation():
    nb = _notebook("x = seeded_randn(3, seed=5)\ncheck_close(double(x), 2 * x, 'double of x')")
    for seed in (11, 23, 37):
        assert all(v.passed for v in _verdicts(nb, rng_seed=seed))


def _helpers():
    namespace = {}
    exec(compile(checks_source(), "<checks>", "exec"), namespace)
    return namespace


class _Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(3, 4)
        self.linear2 = nn.Linear(4, 3)


class _Aliased(nn.Module):
    """The same layers kept in an nn.Sequential registered first: PyTorch names them net.0, net.2."""
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 3))
        self.linear1, self.linear2 = self.net[0], self.net[2]


class _SameDepthAliases(nn.Module):
    """Other names as short as the task's, registered first (fc1 / fc2, as in nanoGPT)."""
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(3, 4), nn.Linear(4, 3)
        self.linear1, self.linear2 = self.fc1, self.fc2


def test_randomized_weights_do_not_depend_on_aliases():
    randomize = _helpers()["randomize_parameters_"]
    plain = randomize(_Plain(), seed=3)
    for aliased in (randomize(_Aliased(), seed=3), randomize(_SameDepthAliases(), seed=3)):
        for name in ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"):
            assert torch.equal(plain.get_parameter(name), aliased.get_parameter(name)), (type(aliased).__name__, name)


def test_seeded_inputs_are_the_same_whatever_the_global_generator_did():
    helpers = _helpers()

    def draw():
        return (helpers["seeded_randn"](2, 3, seed=7),
                torch.randint(0, 9, (5,), generator=helpers["seeded_generator"](7)))
    before = draw()
    torch.rand(100)
    after = draw()
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])


def test_every_assignment_has_a_catalogue_of_alternatives(course):
    for assignment_id in ASSIGNMENT_IDS:   # a debugging lab uses its assignment's
        alternatives = load_alternatives(course, assignment_id)
        assert len(alternatives) >= 4, assignment_id
        assert all(a.how and a.source for a in alternatives)


def test_a_cpu_only_alternative_is_not_run_on_a_gpu_and_the_gate_says_why(course, monkeypatch):
    """float64_probs matches the reference's seeded draw only on the CPU (torch's CUDA sampler draws
    other numbers for float64 probabilities): `check --device cuda` leaves it out and names it."""
    import grader.gate as gate
    jobs_seen = []

    def fake_runs(course, assignment_id, source, jobs, device, desc, progress, split=None):
        jobs_seen.extend(jobs)
        return [[([], [])] * len(seeds) for _, seeds in jobs]

    monkeypatch.setattr(gate, "_runs", fake_runs)
    monkeypatch.setattr(gate, "judge_notebook", lambda trace, records: [])
    alternatives = load_alternatives(course, "a4_kv_cache")
    assert [a.name for a in alternatives if a.cpu_only] == ["float64_probs"]
    on_gpu = gate._check_alternatives(course, "a4_kv_cache", None, NO_TRACE, {}, "cuda", False,
                                        gate.AssignmentReport("a4"))
    assert len(jobs_seen) == len(alternatives)            # the solution, and every alternative but that one
    assert on_gpu.ok and "not run on cuda: float64_probs (on a CUDA device torch.multinomial" in on_gpu.detail
    jobs_seen.clear()
    on_cpu = gate._check_alternatives(course, "a4_kv_cache", None, NO_TRACE, {}, None, False,
                                        gate.AssignmentReport("a4"))
    assert len(jobs_seen) == len(alternatives) + 1 and "not run" not in on_cpu.detail


def test_the_parts_of_a_gate_run_every_mutant_and_every_candidate_once(course, monkeypatch):
    """The suite runs a gate in parts (tests/test_gate.py): together they run exactly the jobs of the
    whole gate, each once."""
    import grader.gate as gate
    jobs_seen = []

    def fake_runs(course, assignment_id, source, jobs, device, desc, progress, split=None):
        jobs_seen.extend(repr(job) for job in jobs)
        return [[({}, [])] * len(seeds or (None,)) for _, seeds in jobs]

    monkeypatch.setattr(gate, "_runs", fake_runs)
    monkeypatch.setattr(gate, "judge_notebook", lambda trace, records: [])

    def jobs(parts, kinds=("mutants", "alternatives")):
        jobs_seen.clear()
        for part in parts:
            if "mutants" in kinds:
                gate._check_mutants(course, "a4_kv_cache", None, NO_TRACE, {}, None, False,
                                    gate.AssignmentReport("a4"), share=part)
            if "alternatives" in kinds:
                gate._check_alternatives(course, "a4_kv_cache", None, NO_TRACE, {}, None, False,
                                         gate.AssignmentReport("a4"), share=part)
        return list(jobs_seen)

    parts = gate.gate_parts(course, "a4_kv_cache", runs_per_part=7)
    assert [str(p) for p in parts][:3] == ["solution", "mutants-1of9", "mutants-2of9"]
    whole = jobs([None])
    in_parts = (jobs([p for p in parts if p.kind == "mutants"], ["mutants"])
                + jobs([p for p in parts if p.kind == "alternatives"], ["alternatives"]))
    assert sorted(in_parts) == sorted(whole)
    assert len(set(whole)) == len(whole) == len(gate.load_catalogue(course, "a4_kv_cache")) + 1 + len(
        load_alternatives(course, "a4_kv_cache"))


def test_runs_in_forked_workers_record_what_runs_here_record(monkeypatch):
    """A gate's jobs on the CPU run in worker processes forked from this one (grader/gate.py _runs):
    each job's records and errors are the ones it gives run here, in order."""
    import grader.gate as gate
    nb = _notebook("check_equal(double(torch.arange(3)), torch.arange(3) * 2, 'double')")
    jobs = [([], (11, 23)), ([(("double",), "def double(x):\n    return 3 * x")], ()),
            ([(("double",), "def double(x):\n    raise ValueError('no')")], (37,))]
    results = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("GRADER_CHECK_WORKERS", workers)
        results[workers] = list(gate._runs(None, "tiny", nb, jobs, None, "tiny", False))
    assert [len(runs) for runs in results["2"]] == [2, 1, 1]
    assert repr(results["1"]) == repr(results["2"])
    # given the split of the test cells (the trace's), no run splits them again: the same records
    splits = []
    monkeypatch.setattr("grader.inprocess.split_notebook", lambda nb: splits.append(nb) or split_notebook(nb))
    monkeypatch.setenv("GRADER_CHECK_WORKERS", "1")
    given = list(gate._runs(None, "tiny", nb, jobs, None, "tiny", False, split_notebook(nb)))
    assert splits == [] and repr(given) == repr(results["1"])
    assert results["2"][1][0][0]["test_double"]["observations"][0]["value"].tolist() == [0, 3, 6]
    assert results["2"][2][0][0]["test_double"]["observations"][0]["type"] == "ValueError"


def test_a_catalogue_is_loaded_once_and_again_when_its_file_changes(tmp_path):
    """grader/mutants.py keeps what it loaded per content of the file: asked again, the same entries
    come back (new records); after an edit, the edited ones."""
    from grader.course import Course
    from grader.mutants import load_catalogue
    course = Course(tmp_path)
    course.mutants_dir.mkdir(parents=True)
    path = course.mutants_dir / "tiny.py"
    entry = ('from grader.mutants import mutant\n\n\n@mutant("double", "{bug}")\n'
             'def wrong(x):\n    return {factor} * x\n')
    path.write_text(entry.format(bug="triples", factor=3))
    first, again = load_catalogue(course, "tiny"), load_catalogue(course, "tiny")
    assert [m.bug for m in first] == [m.bug for m in again] == ["triples"] and first[0] is not again[0]
    path.write_text(entry.format(bug="quadruples", factor=4))
    edited = load_catalogue(course, "tiny")
    assert [m.bug for m in edited] == ["quadruples"] and "4 * x" in edited[0].source


def test_an_alternative_loses_exactly_the_cells_it_declares(monkeypatch):
    """`loses=` (a5's float32-inside styles and its float64 precision cell): the declared cell must be lost, and
    nothing else; a declared cell kept, or another cell lost, fails the gate."""
    import grader.gate as gate
    from grader.judging import CellVerdict
    from grader.mutants import Alternative

    failing = {"": (), "declared": ("test_precision",), "keeps_it": (), "loses_more": ("test_precision", "test_values")}

    def fake_runs(course, assignment_id, source, jobs, device, desc, progress, split=None):
        return [[(replacements, [])] * len(seeds) for replacements, seeds in jobs]

    def fake_judge(trace, replacements):           # the "records" of fake_runs: the replacement it ran
        lost = failing[replacements[0][1] if replacements else ""]
        return [CellVerdict(g, g not in lost) for g in ("test_values", "test_precision")]

    monkeypatch.setattr(gate, "_runs", fake_runs)
    monkeypatch.setattr(gate, "judge_notebook", fake_judge)
    alternatives = [Alternative(name, ("f",), "float32 inside", name, loses=("test_precision",))
                    for name in ("declared", "keeps_it", "loses_more")]
    report = gate.AssignmentReport("a5")
    result = gate._check_alternatives(None, "a5", None, NO_TRACE, {"test_values": 3, "test_precision": 2}, None, False,
                                      report, alternatives=alternatives, minimum=1)
    assert not result.ok
    assert "declared loses" not in result.detail
    assert "keeps_it loses 0 points" in result.detail and "not lost, though loses= declares it" in result.detail
    assert "loses_more loses 3 points" in result.detail
    assert [(name, lost) for name, _, lost, _ in report.alternatives] == [
        ("(reference solution)", 0), ("declared", 0), ("keeps_it", 0), ("loses_more", 3)]
    assert report.alternatives[1][1].endswith("[loses test_precision by design]")
