"""The speed-ups stay correct: a4's fast decode step and its static-shape decoder return exactly what
`generate` returns, and the grader's start-up savings (no rfc3987_syntax grammar, no torch._dynamo
import, nbgrader's alembic revision found in-process) stay in place without changing what the checks,
FlopCounterMode and a new gradebook hold. No timings here: those are in benchmarks/ and docs/results.md."""
import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader import cells
from support import ASSIGNMENT_IDS, LAB_IDS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def a4_reference():
    """The a4 solution's namespace, built the way the KV-cache benchmark builds it."""
    path = ROOT / "benchmarks" / "kv_cache_benchmark.py"
    spec = importlib.util.spec_from_file_location("kv_cache_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_reference()


def test_fast_generate_returns_the_tokens_of_generate(a4_reference):
    ref = a4_reference
    torch.manual_seed(0)
    model = ref["DecoderOnlyLM"](vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=60).eval()
    prompt = torch.randint(0, 97, (3, 7), generator=torch.Generator().manual_seed(1))
    greedy = ref["generate"](model, prompt, 40)
    assert torch.equal(ref["fast_generate"](model, prompt, 40), greedy)
    for temperature, top_k in [(1.0, None), (0.7, 5)]:
        expected = ref["generate"](model, prompt, 25, temperature=temperature, top_k=top_k,
                                   generator=torch.Generator().manual_seed(2))
        fast = ref["fast_generate"](model, prompt, 25, temperature=temperature, top_k=top_k,
                                    generator=torch.Generator().manual_seed(2))
        assert torch.equal(fast, expected), (temperature, top_k)


def test_fast_generate_result_is_an_ordinary_tensor(a4_reference):
    """It decodes under inference_mode; what it returns must still work outside it."""
    ref = a4_reference
    model = ref["DecoderOnlyLM"](vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=12).eval()
    out = ref["fast_generate"](model, torch.zeros(1, 2, dtype=torch.long), 5)
    out[:, 0] = 3                                   # an inference tensor would refuse this
    assert out.shape == (1, 7) and not out.is_inference()


def test_static_shape_decoding_returns_the_tokens_of_generate(a4_reference):
    """a4's StaticDecoder (grader/provided/static_decode.py; the benchmark's GPU rows and, on CUDA, the
    notebook's graph capture use it) is exact on any device: greedy tokens as generate's, the cache
    written at the right positions, and again after a second prompt (the buffers are reused)."""
    ref = a4_reference
    torch.manual_seed(0)
    model = ref["DecoderOnlyLM"](vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64).eval()
    decoder = ref["StaticDecoder"](model, 64)
    for seed, (length, new) in enumerate([(7, 40), (3, 50)]):
        prompt = torch.randint(0, 97, (1, length), generator=torch.Generator().manual_seed(seed))
        expected = ref["generate"](model, prompt, new)
        assert torch.equal(decoder.generate(prompt, new), expected)
        cache = model.make_cache(1, max_len=64)
        with torch.no_grad():
            model(expected[:, :-1], cache=cache)
        stored = length + new - 1
        assert int(decoder.pos) == stored
        for layer in range(2):
            assert torch.allclose(decoder.cache.keys[layer][:, :, :stored], cache.keys[layer][:, :, :stored], atol=1e-5)


def test_static_shape_decoding_ignores_garbage_in_a_fresh_cache(a4_reference):
    """A KVCache built with torch.empty (allowed: a4's alternatives have one) may hold inf or NaN, as
    recycled GPU memory does; the static step reads every position, the unwritten ones with weight
    0, and 0 * NaN is NaN. StaticDecoder zeroes the cache it makes, so the tokens stay generate's."""
    ref = a4_reference
    torch.manual_seed(1)
    model = ref["DecoderOnlyLM"](vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=64).eval()
    make_cache = model.make_cache

    def garbage_cache(*args, **kwargs):
        cache = make_cache(*args, **kwargs)
        for buffer in (*cache.keys, *cache.values):
            buffer.fill_(float("nan"))
        return cache

    model.make_cache = garbage_cache
    prompt = torch.randint(0, 97, (1, 5), generator=torch.Generator().manual_seed(3))
    expected = ref["generate"](model, prompt, 30, use_cache=False)
    assert torch.equal(ref["StaticDecoder"](model, 64).generate(prompt, 30), expected)


def _imports_after(code):
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_execute_worker_does_not_build_the_iri_grammar():
    out = _imports_after("import sys, grader.runtime.execute_worker, nbformat\n"
                         "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    assert out.strip() in ("None", "absent")


@pytest.fixture(scope="module")
def without_dynamo():
    """One fresh process (torch imported once, for both tests below): the forbidden-call check run, then
    FlopCounterMode after fast_flop_counter; each line says whether torch._dynamo was imported
    before and after its step."""
    code = (
        "import sys, torch\n"
        "dynamo = lambda: 'torch._dynamo' in sys.modules\n"
        "before = dynamo()\n"
        "from grader.provided import checks_source\n"
        "helpers = {}\n"
        "exec(checks_source(), helpers)\n"
        "seen = []\n"
        "helpers['_observe'] = lambda kind, actual, *rest: seen.extend(actual)\n"
        "q = torch.randn(2, 3, 4)\n"
        "helpers['check_no_forbidden_calls'](lambda: torch._C._nn.scaled_dot_product_attention(q, q, q), what='x')\n"
        "print(any('scaled_dot_product' in name for name in seen), before, dynamo())\n"
        "before = dynamo()\n"
        "from torch.utils.flop_counter import FlopCounterMode\n"
        "from grader.runtime.record import fast_flop_counter\n"
        "fast_flop_counter()\n"
        "with FlopCounterMode(display=False) as counter:\n"
        "    torch.randn(4, 5) @ torch.randn(5, 6)\n"
        "    torch.randn(2, 4, 5).bmm(torch.randn(2, 5, 3))\n"
        "print(counter.get_total_flops(), before, dynamo())\n")
    return [line.split() for line in _imports_after(code).splitlines()]


def test_forbidden_call_check_works_without_importing_dynamo(without_dynamo):
    assert without_dynamo[0] == ["True", "False", "False"]


def test_prelude_flop_counter_counts_the_same_without_dynamo(without_dynamo):
    counted, before, after = without_dynamo[1]
    assert before == "False", "torch._dynamo was imported before the FLOP counter ran: see the test above"
    assert [counted, after] == [str(2 * 4 * 5 * 6 + 2 * 2 * 4 * 5 * 3), "False"]


@pytest.fixture
def torch_flop_counter():
    """FlopCounterMode with torch's own dispatch method (unwrapped) and module tracker for the test; afterwards as
    it was (the fast path may be in place already: an in-process gate ran here)."""
    from torch.utils import _pytree, module_tracker
    from torch.utils.flop_counter import _FlopCounterMode
    saved = _FlopCounterMode.__dict__["__torch_dispatch__"], module_tracker.tree_flatten
    own = getattr(saved[0], "replaces", saved[0])
    _FlopCounterMode.__torch_dispatch__ = getattr(own, "__wrapped__", own)
    module_tracker.tree_flatten = _pytree.tree_flatten
    try:
        yield _FlopCounterMode
    finally:
        _FlopCounterMode.__torch_dispatch__, module_tracker.tree_flatten = saved


def _flop_workload():
    """Forward and backward through a transformer layer, sdpa, einsum, baddbmm, addmm, a convolution, and a
    forward under inference_mode: ops in torch's FLOP registry, ops that decompose in the mode and ops that do
    neither."""
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(50, 32), nn.TransformerEncoderLayer(32, 4, 64, batch_first=True),
                          nn.LayerNorm(32), nn.Linear(32, 50))
    tokens = torch.randint(0, 50, (3, 9), generator=torch.Generator().manual_seed(1))

    def work():
        logits = model(tokens)
        F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
        q = torch.randn(2, 4, 9, 8, requires_grad=True)
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        torch.einsum("bij,bjk->bik", torch.randn(2, 3, 4), torch.randn(2, 4, 5))
        torch.baddbmm(torch.randn(2, 3, 5), torch.randn(2, 3, 4), torch.randn(2, 4, 5))
        torch.addmm(torch.randn(5), torch.randn(3, 4), torch.randn(4, 5))
        with torch.no_grad():
            nn.Conv1d(3, 4, 3)(torch.randn(2, 3, 10))
        conv = nn.Conv1d(3, 4, 3)
        for input_needs_grad in (True, False):   # the same shapes; convolution_backward's output_mask differs
            conv(torch.randn(2, 3, 10, requires_grad=input_needs_grad)).sum().backward()
        with torch.inference_mode():   # composite ops (linear, matmul, einsum) reach the mode here and decompose
            model(tokens)
            torch.einsum("ij,jk->ik", torch.randn(2, 3), torch.randn(3, 4))
    return work


def _count(work, **options):
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False, **options) as counter:
        work()
    return counter.get_total_flops(), counter.get_flop_counts()


def test_fast_flop_counter_counts_what_torch_counts(torch_flop_counter):
    """The grader's FlopCounterMode dispatch and module tracking (grader/runtime/record.py fast_flop_counter) give
    the totals, the per-module and per-operator counts that torch's own give, for ops in the FLOP registry, ops
    that decompose first and ops that do neither, forward and backward; and they are in place on the course's
    torch."""
    from grader.runtime.record import fast_flop_counter
    work = _flop_workload()
    expected = _count(work)
    assert expected[0] > 0 and "Sequential.1.self_attn" in expected[1]
    fast_flop_counter()
    assert getattr(torch_flop_counter.__torch_dispatch__, "course_fast_path", False), (
        "the fast FlopCounterMode dispatch is not installed on this torch: if torch changed, compare its "
        "flop_counter.py and module_tracker.py with fast_flop_counter() and add the new fingerprint there")
    from torch.utils import module_tracker
    assert module_tracker.tree_flatten.__name__ == "tree_flatten_leaves"
    assert _count(work) == expected
    fast_flop_counter()   # a second call keeps the one in place
    assert _count(work) == expected


def test_remembered_flop_formulas_count_what_torch_counts(torch_flop_counter):
    """fast_flop_counter remembers each of torch's shape formulas' results by what the formula received (shapes,
    the other arguments, their types): a workload counted again, every formula's answer now remembered, gives
    torch's totals, per-module and per-operator counts; calls with equal shapes but other arguments (a convolution's
    backward with and without the input's gradient) are remembered apart; custom formulas are not remembered."""
    from torch.utils import flop_counter

    from grader.runtime.record import fast_flop_counter
    aten = torch.ops.aten
    work = _flop_workload()
    expected = _count(work)
    fast_flop_counter()
    memo = torch_flop_counter.__torch_dispatch__.formula_memo
    for table in memo.values():
        table.clear()
    assert _count(work) == expected           # formulas computed, results remembered
    remembered = {formula: len(table) for formula, table in memo.items()}
    assert _count(work) == expected           # results read back
    assert {formula: len(table) for formula, table in memo.items()} == remembered
    registry = flop_counter.flop_registry
    for packet in (aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.convolution):
        assert memo[registry[packet]], packet
    backward_keys = list(memo[registry[aten.convolution_backward]])
    conv_backward = [key for key in backward_keys if key[1][1:4] == ((torch.Tensor, torch.Size([2, 4, 8])),
                                                                  (torch.Tensor, torch.Size([2, 3, 10])),
                                                                  (torch.Tensor, torch.Size([4, 3, 3])))]
    assert len(conv_backward) == 2, backward_keys   # output_mask [True, True, True] and [False, True, True]
    custom = {aten.mm: lambda a_shape, b_shape, *args, out_shape=None, **kwargs: 3}
    assert _count(lambda: torch.randn(2, 3) @ torch.randn(3, 4), custom_mapping=custom)[0] == 3
    assert not any(formula in memo for formula in _custom_registry(custom).values())


def _custom_registry(mapping):
    from torch.utils.flop_counter import FlopCounterMode
    return {packet: formula for packet, formula in FlopCounterMode(display=False, custom_mapping=mapping)
            .flop_registry.items() if packet in mapping}


def test_fast_flop_counter_gives_custom_formulas_what_torch_gives_them(torch_flop_counter):
    """A custom_mapping formula (wrapped by torch's shape_wrapper, or raw) receives the same shapes and values."""
    from grader.runtime.record import fast_flop_counter
    aten = torch.ops.aten
    calls = []

    def mm_formula(a_shape, b_shape, *args, out_shape=None, **kwargs):
        calls.append(("mm", a_shape, b_shape, args, out_shape, kwargs))
        return 7

    def raw_bmm(a, b, *args, out_val=None, **kwargs):
        calls.append(("bmm", a.shape, b.shape, args, out_val.shape, kwargs))
        return 5
    raw_bmm._get_raw = True

    def work():
        torch.randn(3, 4) @ torch.randn(4, 5)
        torch.randn(2, 3, 4) @ torch.randn(2, 4, 5)
        torch.addmm(torch.randn(5), torch.randn(3, 4), torch.randn(4, 5), beta=0.5)

    mapping = {aten.mm: mm_formula, aten.bmm: raw_bmm, aten.addmm: mm_formula}
    expected = _count(work, custom_mapping=mapping)
    expected_calls, calls[:] = list(calls), []
    fast_flop_counter()
    assert _count(work, custom_mapping=mapping) == expected
    assert calls == expected_calls and len(calls) == 3


def test_the_sandbox_tells_notebooks_they_are_being_graded(tmp_path):
    from grader.sandbox import bwrap_argv
    argv = bwrap_argv(tmp_path, tmp_path)
    settings = {argv[i + 1]: argv[i + 2] for i, arg in enumerate(argv) if arg == "--setenv"}
    assert settings["NBGRADER_EXECUTION"] == "autograde"


def test_new_gradebooks_get_the_revision_the_alembic_program_names(tmp_path):
    """store.patch_nbgrader replaces nbgrader's `alembic heads` subprocess (2.8 CPU-s per new gradebook): the
    revision must be the one the program gives, and a new gradebook carries it."""
    import os
    import sqlite3

    import nbgrader.api

    from grader import store
    program = Path(sys.executable).parent / "alembic"
    if not program.exists():
        pytest.skip("no alembic program beside this Python")
    original = nbgrader.api.get_alembic_version
    store.patch_nbgrader()
    try:
        env = dict(os.environ, PATH=f"{program.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        from nbgrader.dbutil import _temp_alembic_ini
        with _temp_alembic_ini("sqlite:///gradebook.db") as ini:
            said = subprocess.run([str(program), "-c", ini, "heads"], capture_output=True, text=True, env=env,
                                  check=True).stdout
        assert nbgrader.api.get_alembic_version() == said.split()[0]
        with store.gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}"):
            pass
        with sqlite3.connect(tmp_path / "gradebook.db") as db:
            [(stamped,)] = db.execute("SELECT version_num FROM alembic_version").fetchall()
        assert stamped == said.split()[0]
    finally:
        if not getattr(original, "in_process", False):
            nbgrader.api.get_alembic_version = original


# Calls that make a demo cell cost a fraction of a second or more, for every graded student.
COSTLY_CALLS = ("plt.show", "time.perf_counter", "optimizer.step", "measure_matmul_flops")


def _costly_calls_outside_guard(source):
    """Top-level calls of COSTLY_CALLS (not inside a def or class: defining costs nothing) that are not
    in the `else` branch of an `if AUTOGRADING:` statement. Returns their line numbers."""
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def calls(nodes):
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and ast.unparse(sub.func) in COSTLY_CALLS:
                    yield sub.lineno

    tree = ast.parse(source)
    guarded = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "AUTOGRADING":
            guarded.update(calls(node.orelse))
    return sorted(set(calls(n for n in tree.body if not isinstance(n, definitions))) - guarded)


@pytest.mark.parametrize("assignment", ASSIGNMENT_IDS + LAB_IDS)
def test_demo_cells_that_draw_time_or_train_are_skipped_while_autograding(course, assignment):
    """The autograder runs every cell for every student: a plot costs 0.1-0.6 CPU-s, a timing or a
    training run seconds, and neither is graded. Each such demo cell starts with `if AUTOGRADING:`."""
    nb = cells.read(course.source_notebook(assignment))
    setup = "\n".join(c.source for c in nb.cells if cells.grade_id(c) == "setup")
    assert 'AUTOGRADING = os.environ.get("NBGRADER_EXECUTION") == "autograde"' in setup
    unguarded = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cells.is_test_cell(cell) or cells.is_answer_cell(cell):
            continue
        lines = _costly_calls_outside_guard(cell.source)
        if lines:
            unguarded.append(f"cell {index}, line(s) {lines}: {cell.source.splitlines()[0][:60]}")
    assert not unguarded, ("demo cells that draw, time or train outside `if AUTOGRADING: ... else:`:\n"
                           + "\n".join(unguarded))


def test_a_trusted_run_imports_triton_as_graded_runs_do():
    """run_in_process counts FLOPs without torch._dynamo's wrapper, and torch.utils.flop_counter imports
    triton: that must happen in the graded runs' environment, where a machine without a GPU has
    TRITON_INTERPRET=1 (triton.language makes its kernels once, at its first import), or a7's trace runs
    without the interpreter and every one of its kernels' tests fails."""
    from grader.sandbox import GRADED_RUN_ENV
    code = (
        "import os, nbformat\n"
        "os.environ.pop('TRITON_INTERPRET', None)\n"
        "from grader.inprocess import run_in_process\n"
        "run_in_process(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x = 1')]))\n"
        "import triton.language as tl\n"
        "print(type(tl.sum).__name__)\n")
    expected = "InterpretedFunction" if GRADED_RUN_ENV.get("TRITON_INTERPRET") else "JITFunction"
    assert _imports_after(code).strip() == expected


def _largest_new_tensor_by_every_storage(function, *args):
    """largest_new_tensor as first written: every operation's input storages and every result tensor looked at."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    largest = [0]

    def tensors(value):
        return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]

    class Sizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            inputs = {t.untyped_storage().data_ptr() for t in tensors((args, kwargs))}
            for tensor in tensors(result):
                if tensor.untyped_storage().data_ptr() not in inputs:
                    largest[0] = max(largest[0], tensor.numel())
            return result

    with Sizes():
        result = function(*args)
    return result, largest[0]


def test_memory_probe_measures_what_looking_at_every_storage_measures():
    """grader/provided/memory.py looks at an operation's inputs only when a result is larger than the largest so
    far: the same figure as looking at every one, for copies, views, in-place updates and several results."""
    namespace = {}
    exec((ROOT / "grader" / "provided" / "memory.py").read_text(), namespace)
    probe = namespace["largest_new_tensor"]
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    cases = {
        "views only": lambda: (x[:, :3], x.view(8, 6), x.t(), x.expand(2, 6, 8)),
        "in place": lambda: x.clone().add_(1).mul_(2),
        "copy of an expanded view": lambda: x.expand(3, 6, 8).reshape(18, 8),
        "matmul then smaller ops": lambda: (x @ x.t()).softmax(-1)[:2].sum(),
        "several results": lambda: (torch.max(x, dim=1), torch.split(x, 2), torch.cat([x, x, x])[:1]),
        "growing then shrinking": lambda: [torch.zeros(n) for n in (3, 50, 7, 49, 51, 2)],
    }
    for name, function in cases.items():
        _, expected = _largest_new_tensor_by_every_storage(function)
        _, measured = probe(function)
        assert measured == expected, name
    assert probe(cases["growing then shrinking"])[1] == 51


@pytest.fixture
def triton_interpreter():
    """Triton's interpreter module as Triton made it for the test (its overflow checks on, every helper patched
    at every call), and afterwards as it was (the fast path may be in place already: an in-process gate ran
    here); skipped where Triton compiles for a GPU instead."""
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is not what runs kernels here (TRITON_INTERPRET is not 1)")
    interpreter = pytest.importorskip("triton.runtime.interpreter")
    builder, scope_class = interpreter.interpreter_builder, interpreter._LangPatchScope
    saved = builder.options, interpreter._patch_lang, scope_class.__dict__["restore"]
    builder.options = type(saved[0])()
    interpreter._patch_lang = getattr(saved[1], "replaces", saved[1])
    scope_class.restore = getattr(saved[2], "replaces", saved[2])
    try:
        yield interpreter
    finally:
        builder.options, interpreter._patch_lang, scope_class.restore = saved


def test_fast_triton_interpreter_computes_what_triton_computes(triton_interpreter):
    """Without the interpreter's discarded work (grader/runtime/record.py fast_triton_interpreter: the overflow
    checks, the helpers patched again within a launch), kernels give Triton's own interpreter's answers and
    errors, and leave triton.language patched as it does; and the fast path is in place on the course's
    Triton."""
    from grader.runtime.record import fast_triton_interpreter
    from support.interpreted_kernels import run
    expected = run()
    assert expected[1] is not None, "the failing kernel ran: it was meant to raise"
    fast_triton_interpreter()
    assert not triton_interpreter.interpreter_builder.options.sanitize_overflow and getattr(
        triton_interpreter._patch_lang, "course_fast_path", False), (
        "the interpreter's fast path is not installed with this Triton: if Triton changed, compare its semantic.py "
        "and interpreter.py with fast_triton_interpreter() and add the new fingerprints there")
    for _ in range(2):   # a second call keeps the one in place
        answers, error, builtins = run()
        assert all(torch.equal(a, b) for a, b in zip(answers, expected[0], strict=True))
        assert (error, builtins) == expected[1:]
        fast_triton_interpreter()
    assert not triton_interpreter.interpreter_builder.options.debug


@pytest.mark.parametrize("edit", ["none", "points", "grade", "no_id", "extra_key", "old_schema", "new_schema",
                                  "duplicate_id", "markdown_test"])
def test_the_compiled_metadata_check_raises_what_nbgraders_raises(edit):
    """sanitize checks grading metadata with nbgrader's JSON schema compiled once (stages/sanitize.py); a
    notebook passes or fails it exactly as nbgrader's own CheckCellMetadata, with the same error."""
    import copy
    import logging

    import nbformat
    from nbgrader.preprocessors import CheckCellMetadata

    from grader.stages.sanitize import _CheckCellMetadata

    nb = nbformat.read(str(ROOT / "solutions" / "a1_self_attention" / "a1_self_attention.ipynb"), as_version=4)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    meta = graded[0].metadata["nbgrader"]
    {"none": lambda: None, "points": lambda: meta.update(points="ten"), "grade": lambda: meta.update(grade="yes"),
     "no_id": lambda: meta.pop("grade_id"), "extra_key": lambda: meta.update(extra=1),
     "old_schema": lambda: meta.update(schema_version=2), "new_schema": lambda: meta.update(schema_version=4),
     "duplicate_id": lambda: meta.update(grade_id=graded[1].metadata["nbgrader"]["grade_id"]),
     "markdown_test": lambda: setattr(graded[0], "cell_type", "markdown")}[edit]()

    def outcome(step):
        quiet = logging.getLogger("metadata-check-test")
        quiet.disabled = True
        try:
            step(log=quiet).preprocess(copy.deepcopy(nb), {})
        except Exception as error:  # noqa: BLE001 - compared, whatever nbgrader raises
            cause = error.__cause__ or error.__context__
            return type(error), str(error), type(cause), str(cause)
        return "passed"
    expected = outcome(CheckCellMetadata)
    assert outcome(_CheckCellMetadata) == expected
    assert (expected == "passed") == (edit == "none")


@pytest.mark.parametrize("output", [
    {"output_type": "stream", "name": "stdout", "text": "hi"},
    {"output_type": "stream", "name": "stdout"},
    {"output_type": "stream", "name": "stdout", "text": "x", "extra": 1},
    {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["a"]},
    {"output_type": "error", "ename": 1, "evalue": "v", "traceback": []},
    {"output_type": "display_data", "data": {"text/plain": "x", "image/png": "AAA"}, "metadata": {}},
    {"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}},
    {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}, "transient": {}},
    {"output_type": "execute_result", "data": {"text/plain": ["x"]}, "metadata": {}, "execution_count": 3},
    {"output_type": "execute_result", "data": {}, "metadata": {}, "execution_count": "x"},
    {"output_type": "weird"}, "text", None])
def test_the_workers_compiled_output_check_accepts_what_nbformats_accepts(output):
    """The worker checks each output with its part of nbformat's schema compiled once
    (runtime/execute_worker.py); an output passes or fails it exactly as nbformat's own check, which
    raises its error."""
    import copy

    from nbformat.v4 import nbbase

    from grader.runtime.execute_worker import OUTPUT_TYPES, _compiled_output_check

    compiled = _compiled_output_check(nbbase.validate)
    for ref in OUTPUT_TYPES:
        def outcome(check):
            try:
                check(copy.deepcopy(output), ref)
            except Exception as error:  # noqa: BLE001 - compared, whatever nbformat raises
                return type(error), str(error)
            return "passed"
        assert outcome(compiled) == outcome(nbbase.validate)


def test_the_workers_status_file_reads_as_its_last_write(tmp_path):
    """status.json is rewritten in place (never truncated): a shorter status after a longer one still
    reads as itself."""
    import json

    from grader.runtime.execute_worker import StatusFile
    from grader.sandbox import read_json

    status = StatusFile(tmp_path / "status.json")
    status.write({"kernel_pids": [123, 456], "cell": 12, "note": "a long note"})
    status.write({"cell": 3})
    assert read_json(tmp_path / "status.json") == {"cell": 3}
    assert json.loads((tmp_path / "status.json").read_text()) == {"cell": 3}


def test_a_test_cells_call_in_the_kernel_shows_no_result(tmp_path):
    """The call that runs a test cell's kernel code returns its record; as the cell's last expression IPython
    would format it (every tensor of the answers) and send it as the cell's result, which score then
    replaces: the call ends with a semicolon, which IPython's display hook reads as "show nothing"."""
    from IPython.core.displayhook import DisplayHook

    from grader.split import split_notebook
    from grader.stages.execute import instrument
    from support import COURSE

    nb = cells.read(COURSE.source_notebook("a1_self_attention"))
    calls = [cell.source for cell in instrument(nb, split_notebook(nb), tmp_path).cells
             if "__course_grader__.run_test(" in cell.source]
    assert calls, "no test cell's call in the instrumented notebook"
    shown = [call for call in calls if not DisplayHook.semicolon_at_end_of_expression(call)]
    assert not shown, f"these calls would show their record as the cell's result: {shown}"


IPYTHON_SYNTAX = [
    "%matplotlib inline\nimport torch\n", "x = %time 1 + 1\n", "files = !ls -a\nprint(files)\n", "!pip install torch\n",
    "len?\n", "torch.nn.Linear??\n", ",print a b\n", ";print a b\n", "/print 1 2\n", "%%time\nx = 1\n",
    "if True:\n    !ls\n    %time pass\n", "for i in range(3):\n    y = %who_ls\n", "  x = 1\n  y = 2\n",
    ">>> x = 1\n>>> print(x)\n", "In [1]: x = 2\n", "print(7 % 4, f'{0.5:.1%}', 1 != 2, 'what?')  # why?\n",
    "s = '''\n!not a shell command\n%not a magic\n'''\n", "total = (1\n         / 2)\n", "x = 1; print(x)\n",
    "def f(a, b):\n    return a %b\n", "import asyncio\nawait asyncio.sleep(0)\n", "print('unclosed\n",
    "x = (1,\n", "a = !=\n", "obj = None\nobj?\n", "x.y[0]??\n", "%load_ext autoreload\n%autoreload 2\n",
]


def _course_cells():
    """Every code cell of the lectures and the solutions."""
    from support.hosted import NOTEBOOKS
    return [cell.source for path in NOTEBOOKS for cell in cells.read(path).cells if cell.cell_type == "code"]


def test_fast_cell_transforms_transform_every_cell_as_ipython_does():
    """The graded kernel's shortcut past IPython's token transforms and its async check (grader/runtime/record.py
    fast_cell_transforms): every cell of the course, and cells of every kind of IPython syntax, are transformed
    into what IPython makes of them, and run as a coroutine exactly when IPython would."""
    import functools
    from types import SimpleNamespace

    from IPython.core.inputtransformer2 import TransformerManager
    from IPython.core.interactiveshell import InteractiveShell

    from grader.runtime.record import fast_cell_transforms

    def shell():
        return SimpleNamespace(input_transformer_manager=TransformerManager(),
                               should_run_async=functools.partial(InteractiveShell.should_run_async,
                                                                  SimpleNamespace(autoawait=True)))

    ipython, fast = shell(), shell()
    fast_cell_transforms(fast)
    assert fast.input_transformer_manager.do_token_transforms.course_fast_path, "the shortcut was not installed"
    sources = IPYTHON_SYNTAX + _course_cells()
    assert len(sources) > 300
    for source in sources:
        results = []
        for each in (ipython, fast):
            try:
                transformed = each.input_transformer_manager.transform_cell(source)
            except Exception as error:  # noqa: BLE001 - the same error is what must come out
                results.append(("raised", type(error)))
                continue
            results.append((transformed, each.should_run_async(source, transformed_cell=transformed)))
        assert results[0] == results[1], f"the shortcut changes what IPython makes of {source!r}"
    assert ipython.should_run_async("", transformed_cell="import asyncio\nawait asyncio.sleep(0)\n")
    assert not fast.should_run_async("", transformed_cell="x = 1\n")


def test_fast_cell_transforms_leave_a_changed_transformer_manager_alone():
    from types import SimpleNamespace

    from IPython.core.inputtransformer2 import TransformerManager

    from grader.runtime.record import fast_cell_transforms

    manager = TransformerManager()
    manager.token_transformers = manager.token_transformers[:2]
    shell = SimpleNamespace(input_transformer_manager=manager, should_run_async=None)
    fast_cell_transforms(shell)
    assert not getattr(manager.do_token_transforms, "course_fast_path", False) and shell.should_run_async is None


def test_fast_cell_names_are_ipykernels_names(monkeypatch):
    """The graded kernel's MurmurHash2 (grader/runtime/record.py fast_cell_names) names every cell of the course
    as ipykernel's does (tracebacks and a debugger see the same file names); where ipykernel's hash is another,
    it stays."""
    from ipykernel import compiler

    from grader.runtime.record import fast_cell_names

    original = compiler.murmur2_x86
    monkeypatch.setattr(compiler, "murmur2_x86", original)
    fast_cell_names()
    fast = compiler.murmur2_x86
    assert fast is not original and fast.course_fast_path
    for source in IPYTHON_SYNTAX + _course_cells() + ["", "é", "😀x", "a" * 4099]:
        assert fast(source, compiler.get_tmp_hash_seed()) == original(source, compiler.get_tmp_hash_seed()), source

    def another_hash(data, seed):
        return (seed + len(data)) & 0xFFFFFFFF
    monkeypatch.setattr(compiler, "murmur2_x86", another_hash)
    fast_cell_names()
    assert compiler.murmur2_x86 is another_hash


def test_the_workers_notebooks_read_back_as_written(tmp_path):
    """run.ipynb and executed.ipynb go between the grader and its worker as plain JSON (grader/runtime/
    execute_worker.py write_notebook); nbformat reads back the notebook that was written, outputs, multi-line
    sources and any character included."""
    import nbformat

    from grader.runtime.execute_worker import write_notebook
    from support import COURSE

    nb = cells.read(COURSE.root / "lectures" / "02_self_attention.ipynb")
    nb.cells.append(nbformat.v4.new_code_cell("print('é∑😀')\n\n# two lines", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="é∑😀\nline two\n")]))
    write_notebook(nb, tmp_path / "run.ipynb")
    assert nbformat.read(tmp_path / "run.ipynb", as_version=4) == nb
