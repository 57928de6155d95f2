"""Tests set known weights through the names the task fixes (`layer.q_proj`, `model.blocks[0].attn`),
by attribute access, never through the names a class happens to register its parameters under: a
correct module that keeps its layers as `W_q` and offers `q_proj` as a property (d2l's style) gets
exactly the reference's weights, from randomize_parameters_ and from a2's hidden loader alike."""
import pytest
import torch
import torch.nn as nn

from grader import cells
from grader.provided import checks_source


def _namespace(course, assignment_id, hidden_of=None):
    """The solution notebook's setup, provided and answer cells run in one namespace; with
    `hidden_of`, also the hidden part of that test cell (where a2 keeps its helpers)."""
    namespace = {}
    nb = cells.read(course.source_notebook(assignment_id))
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") == "setup" or cells.provided_file(cell) or cells.is_answer_cell(cell):
            exec(compile(cell.source, f"<{assignment_id} {meta.get('grade_id')}>", "exec"), namespace)
        elif hidden_of and meta.get("grade_id") == hidden_of:
            hidden = cell.source.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
            exec(compile(hidden, f"<{assignment_id} {hidden_of}>", "exec"), namespace)
    return namespace


class D2LSelfAttention(nn.Module):
    """a1's SelfAttention as d2l writes it: W_q, W_k, W_v registered, the task's names as properties."""
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)

    q_proj = property(lambda self: self.W_q)
    k_proj = property(lambda self: self.W_k)
    v_proj = property(lambda self: self.W_v)


def _d2l_attention(namespace):
    """a2's MultiHeadAttention in d2l's style, attention through the notebook's own functions."""
    split_heads, merge_heads = namespace["split_heads"], namespace["merge_heads"]
    attention = namespace["scaled_dot_product_attention"]

    class D2LMultiHeadAttention(nn.Module):
        def __init__(self, d_model, n_heads, bias=True):
            super().__init__()
            self.n_heads = n_heads
            self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

        q_proj = property(lambda self: self.W_q)
        k_proj = property(lambda self: self.W_k)
        v_proj = property(lambda self: self.W_v)
        o_proj = property(lambda self: self.W_o)

        def forward(self, query, key=None, value=None, mask=None):
            key = query if key is None else key
            value = key if value is None else value
            q, k, v = (split_heads(layer(t), self.n_heads)
                       for layer, t in ((self.W_q, query), (self.W_k, key), (self.W_v, value)))
            out, self.last_attn_weights = attention(q, k, v, mask)
            return self.W_o(merge_heads(out))

    return D2LMultiHeadAttention


@pytest.fixture(scope="module")
def a1(course):
    return _namespace(course, "a1_self_attention")


@pytest.fixture(scope="module")
def a2(course):
    return _namespace(course, "a2_multihead_masking", hidden_of="test_split_merge_heads")


def test_a_property_named_projection_gets_the_reference_weights(a1):
    randomize = a1["randomize_parameters_"]
    reference = randomize(a1["SelfAttention"](8, 4, 6), seed=40)
    d2l = randomize(D2LSelfAttention(8, 4, 6), seed=40)
    assert [name for name, _ in d2l.named_parameters()] == ["W_q.weight", "W_k.weight", "W_v.weight"]
    for name in ("q_proj", "k_proj", "v_proj"):
        assert torch.equal(getattr(d2l, name).weight, getattr(reference, name).weight), name


def test_the_task_paths_are_the_reference_names_so_the_seeds_are_unchanged(a2):
    """The seed is seed + crc32(path); for the reference the task path of every parameter is the name
    PyTorch registers it under, so every expected value recorded from the reference stays the same."""
    model = a2["DecoderOnlyLM"](11, 8, 2, 2, 16, 6)
    paths = a2["task_parameters"](model)
    assert sorted(paths) == sorted(name for name, _ in model.named_parameters())
    assert all(paths[name] is parameter for name, parameter in model.named_parameters())


def test_weights_outside_the_task_names_are_left_as_initialised(a1):
    class WithExtra(D2LSelfAttention):
        def __init__(self):
            super().__init__(4, 4)
            self.gate = nn.Parameter(torch.ones(4))

    module = a1["randomize_parameters_"](WithExtra(), seed=1)
    assert torch.equal(module.gate, torch.ones(4))
    assert not torch.equal(module.q_proj.weight, a1["randomize_parameters_"](WithExtra(), seed=2).q_proj.weight)


def test_a2_loader_sets_weights_through_the_task_names(a2):
    values = a2["_values"](a2["_mha_shapes"](8), seed=140)
    reference = a2["_load_"](a2["MultiHeadAttention"](8, 2), values)
    d2l = a2["_load_"](_d2l_attention(a2)(8, 2), values)
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert torch.equal(getattr(d2l, name).weight, values[f"{name}.weight"]), name
        assert torch.equal(getattr(d2l, name).bias, values[f"{name}.bias"]), name
    x = a2["seeded_randn"](2, 5, 8, seed=141)
    with torch.no_grad():
        assert torch.allclose(d2l(x), reference(x), atol=1e-6)


def test_a2_loader_reaches_blocks_behind_a_property_and_names_a_missing_weight(a2):
    """A language model that keeps its blocks as `trf_blocks` with `blocks` a property (the style of
    LLMs-from-scratch) is loaded in full; a model without a fixed name gets an error that names it."""
    reference_class = a2["DecoderOnlyLM"]

    class PropertyBlocks(reference_class):
        def __init__(self, *args):
            super().__init__(*args)
            self.trf_blocks = self._modules.pop("blocks")

        blocks = property(lambda self: self.trf_blocks)

    shapes = a2["_lm_shapes"](12, 8, 2, 16, 6)
    values = a2["_values"](shapes, seed=0)
    model = a2["_load_"](PropertyBlocks(12, 8, 2, 2, 16, 6), values)
    assert any(name.startswith("trf_blocks.") for name, _ in model.named_parameters())
    reference = a2["_load_"](reference_class(12, 8, 2, 2, 16, 6), values)
    ids = torch.randint(0, 12, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(ids), reference(ids))

    class NoNormF(reference_class):
        def __init__(self, *args):
            super().__init__(*args)
            self.ln_f = self._modules.pop("norm_f")

    with pytest.raises(AttributeError, match="norm_f.weight"):
        a2["_load_"](NoNormF(12, 8, 2, 2, 16, 6), values)


def test_a_fused_projection_is_written_through_the_views_the_task_names_give():
    """nanoGPT keeps q, k and v in one c_attn; a class offering `q_proj` as rows of it is filled there."""
    helpers = {}
    exec(compile(checks_source(), "<checks>", "exec"), helpers)

    class Rows:
        def __init__(self, fused, start, stop):
            self.fused, self.start, self.stop = fused, start, stop
        weight = property(lambda self: self.fused.weight[self.start:self.stop])

    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(4, 12, bias=False)
        q_proj = property(lambda self: Rows(self.c_attn, 0, 4))
        k_proj = property(lambda self: Rows(self.c_attn, 4, 8))
        v_proj = property(lambda self: Rows(self.c_attn, 8, 12))

    fused = helpers["randomize_parameters_"](Fused(), seed=40)
    plain = helpers["randomize_parameters_"](D2LSelfAttention(4, 4), seed=40)
    assert torch.equal(fused.c_attn.weight, torch.cat([plain.W_q.weight, plain.W_k.weight, plain.W_v.weight]))


def test_a_module_that_answers_every_name_does_not_send_the_search_in_circles():
    helpers = {}
    exec(compile(checks_source(), "<checks>", "exec"), helpers)

    class Everything(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(2, 2, bias=False)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return Everything.__new__(Everything)   # a fresh object for any other name

    paths = helpers["task_parameters"](Everything())     # only the task's own nesting is followed
    assert "q_proj.weight" in paths and all(len(path.split(".")) <= 5 for path in paths)


def _with_buffers(module, names=("bias", "weight", "mask")):
    """Register a causal-mask-like buffer under each name on `module` (nanoGPT's and GPT-2's `bias`)."""
    for name in names:
        module.register_buffer(name, torch.tril(torch.ones(6, 6)).view(1, 1, 6, 6))
    return module


def test_buffers_named_like_weights_are_never_seeded_or_loaded(a2):
    """nanoGPT and GPT-2 keep the causal mask in a buffer named `bias`: a test that wrote random numbers into
    it would block every key (nanoGPT compares it with 0) or let later tokens see the future (GPT-2's bool
    buffer becomes all True). Buffers named bias, weight or mask on the model, on every block and on every
    attention layer are left as the module made them, by randomize_parameters_ and by a2's hidden loader,
    and the task's parameters get the same values as without them."""
    model_class = a2["DecoderOnlyLM"]
    plain = a2["randomize_parameters_"](model_class(11, 8, 2, 2, 16, 6), seed=33)
    buffered = model_class(11, 8, 2, 2, 16, 6)
    for module in [buffered, *buffered.blocks, *(block.attn for block in buffered.blocks)]:
        _with_buffers(module)
    masks = {name: buffer.clone() for name, buffer in buffered.named_buffers()}
    assert len(masks) == 3 * 5
    paths = a2["task_parameters"](buffered)
    assert sorted(paths) == sorted(name for name, _ in buffered.named_parameters())
    a2["randomize_parameters_"](buffered, seed=33)
    assert all(torch.equal(buffer, masks[name]) for name, buffer in buffered.named_buffers())
    assert all(torch.equal(p, plain.get_parameter(name)) for name, p in buffered.named_parameters())
    values = a2["_values"](a2["_lm_shapes"](11, 8, 2, 16, 6), seed=180)
    a2["_load_"](buffered, values)
    assert all(torch.equal(buffer, masks[name]) for name, buffer in buffered.named_buffers())


def test_a_bias_buffer_on_the_model_keeps_the_language_model_causal(a2):
    """The regression itself: nanoGPT's float mask `bias` on the model, used as `bias[:, :, :L, :L] == 1`,
    gives the reference's logits after randomize_parameters_ (it gave every query zero weights)."""
    model_class = a2["DecoderOnlyLM"]

    class NanoGPTMask(model_class):
        def __init__(self, *args):
            super().__init__(*args)
            self.register_buffer("bias", torch.tril(torch.ones(self.max_len, self.max_len)).view(
                1, 1, self.max_len, self.max_len))

        def forward(self, ids):
            length = ids.shape[1]
            x = self.tok_emb(ids) + self.pos_emb(torch.arange(length))
            for block in self.blocks:
                x = block(x, self.bias[:, :, :length, :length] == 1)
            return self.lm_head(self.norm_f(x))

    reference = a2["randomize_parameters_"](model_class(10, 8, 2, 2, 16, 8), seed=33)
    nanogpt = a2["randomize_parameters_"](NanoGPTMask(10, 8, 2, 2, 16, 8), seed=33)
    ids = torch.randint(0, 10, (2, 7), generator=torch.Generator().manual_seed(34))
    with torch.no_grad():
        assert torch.allclose(nanogpt(ids), reference(ids), atol=1e-6)


def test_only_the_named_layers_weights_count_not_a_container_s_own():
    """A `weight` or `bias` parameter on the model, a block or an attention layer itself is no weight the task
    names (the task names q_proj.weight, norm1.bias, ...): left as initialised, like any extra parameter."""
    helpers = {}
    exec(compile(checks_source(), "<checks>", "exec"), helpers)
    module = D2LSelfAttention(4, 4)
    module.weight = nn.Parameter(torch.ones(3))
    paths = helpers["task_parameters"](module)
    assert sorted(paths) == ["k_proj.weight", "q_proj.weight", "v_proj.weight"]
    assert torch.equal(helpers["randomize_parameters_"](module, seed=1).weight, torch.ones(3))
