"""Code that one lecture copies from another is the same code.

Lectures stand alone (they open in Colab as one file and cannot import the grader), so a lecture that
reuses another's code carries a copy, in a cell whose metadata names the original:
`"course": {"copied_from": "<lecture stem>"}`. Every class and function such a cell defines must be
defined, character for character, in that lecture; a change made to one copy and not the other fails
here. Lecture 13 trains and samples lecture 8's decoder and KV cache this way, lecture 6 carries the
attention, block and training code of lecture 5, and the encoder lecture builds the capstone's corpus (the
standard library's docstrings, character tokens) with the capstone's own code and loads its real pretrained encoder
into lecture 6's attention and block.

And lecture 8's decoder is the course's model: loaded with the weights of assignment 2's
`DecoderOnlyLM` (grader/provided/model.py, what a3 and a4 receive as a provided cell), it computes the
same logits, so lecture 13 trains "the a2 decoder" without carrying a2's answer. So is a6's provided
decoder (grader/provided/real_models.py, lecture 9's options) with its defaults; and that file is lecture 9's
code, definition for definition, so that a6 and the lecture speak of the same functions. Fast: no kernel.
"""
import ast
import math
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
LECTURES = {p.stem: p for p in sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))}
CAPSTONE = "13_a_model_that_writes_text"
ENCODERS = "12_encoders"


def _cells(stem):
    return nbformat.read(str(LECTURES[stem]), as_version=4).cells


def _definitions(source):
    """{name: source text} of the top-level classes and functions in `source`."""
    tree = ast.parse(source)
    return {node.name: ast.get_source_segment(source, node) for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}


def _assignments(source):
    """{name: source text} of the top-level assignments to one name in `source`."""
    tree = ast.parse(source)
    return {node.targets[0].id: ast.get_source_segment(source, node) for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def _lecture_definitions(stem):
    found = {}
    for cell in _cells(stem):
        if cell.cell_type == "code":
            found.update(_definitions(cell.source))
    return found


def _copied_cells():
    """(copying lecture, cell index, original lecture, cell source) of every marked cell."""
    marked = []
    for stem in LECTURES:
        for index, cell in enumerate(_cells(stem)):
            original = cell.metadata.get("course", {}).get("copied_from")
            if original:
                marked.append((stem, index, original, cell.source))
    return marked


COPIED = _copied_cells()


def test_the_capstone_carries_lecture_8s_model_and_cache():
    assert CAPSTONE in LECTURES, f"lectures/{CAPSTONE}.ipynb is missing"
    names = {name for stem, _, original, source in COPIED if stem == CAPSTONE
             for name in _definitions(source)}
    assert {"PreallocKVCache", "CausalSelfAttention", "Block", "TinyDecoder"} <= names, \
        f"{CAPSTONE} should carry lecture 8's decoder and cache in a cell marked copied_from; it marks {sorted(names)}"


def test_the_encoder_lecture_builds_the_capstones_corpus():
    assert ENCODERS in LECTURES, f"lectures/{ENCODERS}.ipynb is missing"
    names = {name for stem, _, original, source in COPIED if stem == ENCODERS and original == CAPSTONE
             for name in _definitions(source)}
    assert {"docstrings", "encode", "decode"} <= names, \
        (f"{ENCODERS} should build its corpus with {CAPSTONE}'s code, in cells marked copied_from; "
         f"it marks {sorted(names)}")
    ours, theirs = {}, {}                   # the corpus is fixed by two constants too: the modules and the vocabulary
    for source in (source for stem, _, original, source in COPIED if stem == ENCODERS and original == CAPSTONE):
        ours.update(_assignments(source))
    for cell in _cells(CAPSTONE):
        if cell.cell_type == "code":
            theirs.update(_assignments(cell.source))
    for name in ("MODULES", "VOCAB"):
        assert name in ours and ours[name] == theirs.get(name), f"{ENCODERS}'s {name} differs from {CAPSTONE}'s"


@pytest.mark.parametrize("stem, index, original, source", COPIED,
                         ids=[f"{stem}[{index}]" for stem, index, _, _ in COPIED])
def test_a_copied_cell_matches_its_original(stem, index, original, source):
    assert original in LECTURES, f"{stem} [cell {index}] says it is copied from {original}, which does not exist"
    theirs = _lecture_definitions(original)
    ours = _definitions(source)
    assert ours, f"{stem} [cell {index}] is marked copied_from but defines nothing"
    for name, text in ours.items():
        assert name in theirs, f"{stem} [cell {index}] defines {name}, which {original} does not"
        assert text == theirs[name], (
            f"{name} in {stem} [cell {index}] differs from {original}'s: copy the current definition over "
            f"(the lectures must run the same code)")


def _namespace(source, **extra):
    namespace = {"math": math, "torch": torch, "nn": nn, "F": F, **extra}
    exec(compile(source, "<copied cell>", "exec"), namespace)
    return namespace


def test_lecture_8s_decoder_computes_what_the_a2_model_computes():
    source = next(source for stem, _, _, source in COPIED if stem == CAPSTONE and "class TinyDecoder" in source)
    lecture = _namespace(source)
    provided = REPO / "grader" / "provided"
    a2 = _namespace((provided / "attention.py").read_text() + "\n" + (provided / "model.py").read_text())
    config = dict(vocab_size=96, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16)
    torch.manual_seed(0)
    reference = a2["DecoderOnlyLM"](**config).eval()
    tiny = lecture["TinyDecoder"](**config).eval()
    # the only difference in names: a2's block keeps its feed-forward layers in `ff`
    renamed = {name.replace(".ff.linear", ".linear"): value for name, value in reference.state_dict().items()}
    tiny.load_state_dict(renamed, strict=True)                      # same parameters, same shapes
    ids = torch.randint(0, 96, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(ids)
        assert torch.allclose(tiny(ids), expected, atol=1e-5), "the lecture decoder's logits differ from a2's model"
        cache = tiny.make_cache(3)                                  # and with lecture 8's cache, step by step
        stepped = torch.cat([tiny(ids[:, :5], cache)] + [tiny(ids[:, t:t + 1], cache) for t in range(5, 16)], dim=1)
    assert torch.allclose(stepped, expected, atol=1e-5), "cached decoding differs from a2's model on the same ids"


def test_a6s_provided_decoder_is_lecture_9s_code():
    """Every class and function of grader/provided/real_models.py (what a6 provides) is defined, character for
    character, in lecture 9; and a6's own functions (its answer cells) take the lecture's signatures where the lecture
    defines the same name."""
    lecture = _lecture_definitions("09_gpt2_and_llama")
    provided = _definitions((REPO / "grader" / "provided" / "real_models.py").read_text())
    assert {"Decoder", "Attention", "from_llama", "rope_of", "generate_greedy"} <= set(provided)
    assert "rotary_cos_sin" not in provided, "rotary_cos_sin is a6's to write: the provided cell must not define it"
    for name, text in provided.items():
        assert name in lecture, f"grader/provided/real_models.py defines {name}, which lecture 9 does not"
        assert text == lecture[name], (f"{name} in grader/provided/real_models.py differs from lecture 9's: a6 must "
                                       f"provide the lecture's code (copy the current definition over)")
    source = nbformat.read(str(REPO / "solutions" / "a6_real_models" / "a6_real_models.ipynb"), as_version=4)
    answers = {}
    for cell in source.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            answers.update({node.name: node for node in ast.parse(cell.source).body
                            if isinstance(node, ast.FunctionDef)})
    lecture_nodes = {}
    for cell in _cells("09_gpt2_and_llama"):
        if cell.cell_type == "code":
            lecture_nodes.update({node.name: node for node in ast.parse(cell.source).body
                                  if isinstance(node, ast.FunctionDef)})
    shared = set(answers) & set(lecture_nodes)
    assert "rotary_cos_sin" in shared
    for name in shared:
        assert ast.dump(answers[name].args) == ast.dump(lecture_nodes[name].args), \
            f"a6's {name} takes other arguments than lecture 9's: one name, one signature"


def test_a6s_provided_decoder_with_its_defaults_is_the_a2_model():
    """a6 gives students lecture 9's decoder (grader/provided/real_models.py, one copy) and grades their
    conversions through it; with its default options it must be a2's DecoderOnlyLM, names and logits."""
    provided = REPO / "grader" / "provided"
    a2 = _namespace((provided / "attention.py").read_text() + "\n" + (provided / "model.py").read_text())
    a6 = _namespace((provided / "real_models.py").read_text(),
                    repeat_kv=lambda x, n_rep: x.repeat_interleave(n_rep, dim=1))
    config = dict(vocab_size=96, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16)
    torch.manual_seed(0)
    reference = a2["DecoderOnlyLM"](**config).eval()
    decoder = a6["Decoder"](a6["DecoderConfig"](**config)).eval()
    decoder.load_state_dict(reference.state_dict(), strict=True)   # the same names and shapes
    ids = torch.randint(0, 96, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.allclose(decoder(ids), reference(ids), atol=1e-5), "a6's decoder differs from a2's model"
