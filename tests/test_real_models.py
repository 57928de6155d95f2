"""Lecture 9's conversions are exact: the functions and classes its cells define (read from the
notebook as stored, as test_lecture_copies.py reads the lectures) load a `transformers` GPT-2 and Llama,
built with random weights from small configurations, into the course's decoder, and the converted model
gives the same logits (1e-5) and, with the course's KV cache, the same greedy tokens as `transformers`'
`generate(do_sample=False)`. With its default options the lecture's decoder is assignment 2's
`DecoderOnlyLM` (grader/provided/model.py), parameter names included. Nothing is downloaded: the
configurations are built here, and the suite runs with HF_HUB_OFFLINE=1 (tests/conftest.py).

Slow (importing transformers takes seconds): `make test-fast` leaves it out.
"""
import ast
import math
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
LECTURE = REPO / "lectures" / "09_gpt2_and_llama.ipynb"


def _lecture_namespace():
    """Every top-level function and class of the lecture's code cells (decorators included), executed in
    a namespace with the lecture's imports; the cells' other statements (checks, plots) are left out."""
    nb = nbformat.read(str(LECTURE), as_version=4)
    namespace = {"math": math, "os": os, "threading": threading, "torch": torch, "nn": nn, "F": F,
                 "dataclass": dataclass, "replace": replace, "contextmanager": contextmanager,
                 "device": "cpu", "AUTOGRADING": False, "tqdm": lambda iterable, **kwargs: iterable}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in ("tqdm", "pick_device"):
                module = ast.Module(body=[node], type_ignores=[])
                exec(compile(module, f"{LECTURE.name}: {node.name}", "exec"), namespace)
    return namespace


L13 = _lecture_namespace()


@pytest.fixture(scope="module")
def hf():
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


def _check(hf_model, ours, vocab_size, seed, n_new=30, batch=2, prompt_len=7):
    """The converted model's logits (1e-5) and greedy tokens equal transformers'."""
    ids = torch.randint(0, vocab_size, (batch, prompt_len + n_new), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        theirs = hf_model(ids).logits
        diff = (theirs - ours(ids)).abs().max().item()
    assert theirs.std() > 0.3, "the logits are too small for a 1e-5 check to mean anything: jitter the weights"
    assert diff < 1e-5, f"converted logits differ from transformers' by {diff:.2e}"
    prompt = ids[:, :prompt_len]
    expected = hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n_new,
                                 do_sample=False, pad_token_id=0)
    got, _ = L13["generate_greedy"](ours, prompt, n_new, cache=ours.make_cache(batch, prompt_len + n_new))
    assert torch.equal(got, expected), f"greedy tokens differ:\n ours {got.tolist()}\n theirs {expected.tolist()}"
    return diff


@pytest.mark.parametrize("n_layer, n_embd, n_head, vocab_size", [(2, 64, 4, 500), (3, 48, 6, 301)])
def test_gpt2_converts_exactly(hf, n_layer, n_embd, n_head, vocab_size):
    torch.manual_seed(0)
    config = hf.GPT2Config(vocab_size=vocab_size, n_positions=48, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                           bos_token_id=None, eos_token_id=None)
    hf_model = L13["jitter"](hf.GPT2LMHeadModel(config), seed=1).eval()
    ours = L13["from_gpt2"](hf_model)
    assert ours.lm_head.weight is ours.tok_emb.weight, "GPT-2's output layer is tied to its token embedding"
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf_model.parameters())
    _check(hf_model, ours, vocab_size, seed=2)


@pytest.mark.parametrize("heads, kv_heads, tied, theta", [
    (4, 2, False, 10000.0),       # grouped-query attention
    (4, 1, False, 10000.0),       # multi-query attention
    (4, 4, True, 500000.0),       # multi-head, tied output layer, Llama 3's rotary base
])
def test_llama_converts_exactly(hf, heads, kv_heads, tied, theta):
    torch.manual_seed(0)
    config = hf.LlamaConfig(vocab_size=400, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                            num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=48,
                            rope_theta=theta, tie_word_embeddings=tied, bos_token_id=None, eos_token_id=None)
    hf_model = L13["jitter"](hf.LlamaForCausalLM(config), seed=3).eval()
    ours = L13["from_llama"](hf_model)
    assert ours.cfg.kv_heads == kv_heads and ours.cfg.rope_base == theta and ours.cfg.tied == tied
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in hf_model.parameters())
    assert not any(name.endswith("bias") for name, _ in ours.named_parameters()), "Llama has no biases"
    cache = ours.make_cache(1, 10)
    assert cache.k.shape[2] == kv_heads, "the cache should hold the key/value heads only"
    _check(hf_model, ours, 400, seed=4)


def test_the_conversions_refuse_what_the_decoder_does_not_compute(hf):
    gpt2 = hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                            activation_function="relu"))
    with pytest.raises(ValueError):
        L13["from_gpt2"](gpt2)
    small = dict(vocab_size=50, hidden_size=16, intermediate_size=40, num_hidden_layers=1, num_attention_heads=2,
                 max_position_embeddings=16)
    with pytest.raises(ValueError):
        L13["from_llama"](hf.LlamaForCausalLM(hf.LlamaConfig(**small, attention_bias=True)))
    scaled = hf.LlamaConfig(**small)
    scaled.rope_parameters = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    with pytest.raises(ValueError):
        L13["rope_of"](scaled)


def test_llama_31s_rescaling_is_carried_to_the_decoder_and_left_to_a6(hf):
    """rope_of passes Llama 3.1's "llama3" numbers on to DecoderConfig.rope_scaling; the lecture's rotary_cos_sin
    refuses to compute them (assignment 6 writes that), so a converted Llama 3.1 cannot silently run unscaled."""
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    config = hf.LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                            num_attention_heads=2, max_position_embeddings=16, rope_parameters=rope)
    base, scaling = L13["rope_of"](config)
    assert base == 500000.0
    assert scaling == {key: value for key, value in rope.items() if key != "rope_theta"}
    ours = L13["from_llama"](hf.LlamaForCausalLM(config).eval())
    assert ours.cfg.rope_scaling == scaling
    with pytest.raises(ValueError, match="not implemented"):
        ours(torch.zeros(1, 4, dtype=torch.long))


def test_a_conversion_that_leaves_a_parameter_out_fails(hf):
    gpt2 = hf.GPT2LMHeadModel(hf.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2))
    weights = L13["Weights"](gpt2)
    weights("transformer.wte.weight")
    cfg = L13["DecoderConfig"](vocab_size=50, d_model=16, n_heads=2, n_layers=1, d_ff=64, max_len=16)
    with pytest.raises(ValueError, match="left out"):
        weights.build(cfg, {})


def test_with_its_defaults_the_decoder_is_the_a2_model():
    """Assignment 2's DecoderOnlyLM (what a3 and a4 receive as a provided cell) loads into the lecture's
    decoder by name, strictly, and both compute the same logits, with and without the cache."""
    provided = REPO / "grader" / "provided"
    a2 = {"math": math, "torch": torch, "nn": nn, "F": F}
    exec(compile((provided / "attention.py").read_text() + "\n" + (provided / "model.py").read_text(),
                 "grader/provided", "exec"), a2)
    config = dict(vocab_size=96, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=16)
    torch.manual_seed(0)
    reference = a2["DecoderOnlyLM"](**config).eval()
    ours = L13["Decoder"](L13["DecoderConfig"](**config)).eval()
    ours.load_state_dict(reference.state_dict(), strict=True)
    ids = torch.randint(0, 96, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(ids)
        assert torch.allclose(ours(ids), expected, atol=1e-5)
        cache = ours.make_cache(3)
        stepped = torch.cat([ours(ids[:, :5], cache)] + [ours(ids[:, t:t + 1], cache) for t in range(5, 16)], dim=1)
    assert torch.allclose(stepped, expected, atol=1e-5)


def test_offline_the_real_model_is_skipped_at_once(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    assert L13["hub_reachable"]() is False
    assert time.monotonic() - start < 0.5
    nb = nbformat.read(str(LECTURE), as_version=4)
    last = [cell for cell in nb.cells if cell.cell_type == "code"][-1]
    text = "".join(output.get("text", "") for output in last.outputs)
    assert text.startswith("Offline"), "store the lecture as executed offline (no text from the downloaded GPT-2)"


def test_the_suite_runs_offline():
    assert os.environ.get("HF_HUB_OFFLINE") == "1", "conftest.py at the repository's root sets HF_HUB_OFFLINE=1"
