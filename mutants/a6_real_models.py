"""Mutation catalogue for a6_real_models: realistic wrong implementations, one bug each.
`python -m grader check a6_real_models` proves every one of them loses points."""
import math

import torch
import torch.nn.functional as F

from grader.mutants import mutant

# --- gelu_tanh ---------------------------------------------------------------------------------


@mutant("gelu_tanh", "the exact GELU (erf) instead of GPT-2's tanh form",
        fails=("test_gelu_tanh", "test_gpt2_state_dict_to_course"))
def gelu_exact(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


@mutant("gelu_tanh", "the cubic term's coefficient on the outside: tanh(sqrt(2/pi) x) + 0.044715 x^3",
        fails=("test_gelu_tanh", "test_gpt2_state_dict_to_course"))
def gelu_cubic_outside(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * x) + 0.044715 * x ** 3)


# --- rms_norm ----------------------------------------------------------------------------------


@mutant("rms_norm", "subtracts the mean first, as LayerNorm does",
        fails=("test_rms_norm", "test_llama_state_dict_to_course"))
def rms_norm_centred(x, weight, eps=1e-6):
    x = x - x.mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


@mutant("rms_norm", "eps hard-coded to 1e-6 whatever the argument says",
        fails=("test_rms_norm", "test_llama_state_dict_to_course"))
def rms_norm_eps_hard_coded(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight


@mutant("rms_norm", "eps added outside the square root",
        fails=("test_rms_norm", "test_llama_state_dict_to_course"))
def rms_norm_eps_outside(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * weight


# --- swiglu ------------------------------------------------------------------------------------


@mutant("swiglu", "SiLU on the up projection: gate and up swapped",
        fails=("test_swiglu", "test_llama_state_dict_to_course"))
def swiglu_gate_up_swapped(x, gate_proj, up_proj, down_proj):
    return F.linear(F.linear(x, gate_proj) * F.silu(F.linear(x, up_proj)), down_proj)


@mutant("swiglu", "a sigmoid gate (GLU) instead of SiLU", fails=("test_swiglu", "test_llama_state_dict_to_course"))
def swiglu_sigmoid_gate(x, gate_proj, up_proj, down_proj):
    return F.linear(torch.sigmoid(F.linear(x, gate_proj)) * F.linear(x, up_proj), down_proj)


# --- rotary_cos_sin ----------------------------------------------------------------------------


@mutant("rotary_cos_sin", "ignores the offset: always positions 0 .. seq_len - 1", fails=("test_rotary_cos_sin",))
def rotary_offset_ignored(seq_len, head_dim, base=10000.0, offset=0, device=None):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "the base hard-coded to 10000",
        fails=("test_rotary_cos_sin", "test_llama_state_dict_to_course"))
def rotary_base_hard_coded(seq_len, head_dim, base=10000.0, offset=0, device=None):
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.arange(offset, offset + seq_len, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "each angle repeated for neighbouring columns (repeat_interleave), the layout of pairs "
        "(2i, 2i+1)", fails=("test_rotary_cos_sin", "test_apply_rotary", "test_llama_state_dict_to_course"))
def rotary_angles_interleaved(seq_len, head_dim, base=10000.0, offset=0, device=None):
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.arange(offset, offset + seq_len, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
    angles = angles.repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()


# --- apply_rotary ------------------------------------------------------------------------------


@mutant("apply_rotary", "rotates neighbouring pairs (2i, 2i+1) instead of rotate_half's (i, i + d/2)",
        fails=("test_apply_rotary", "test_llama_state_dict_to_course"))
def rotary_neighbour_pairs(q, k, cos, sin):
    def turn(x):
        pair = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
        return x * cos + pair * sin
    return turn(q), turn(k)


@mutant("apply_rotary", "rotate_half with the sign on the wrong half: (x2, -x1), a turn by minus the angle",
        fails=("test_apply_rotary", "test_llama_state_dict_to_course"))
def rotary_sign_flipped(q, k, cos, sin):
    def turn(x):
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((x2, -x1), dim=-1) * sin
    return turn(q), turn(k)


@mutant("apply_rotary", "the keys are returned unturned (only q rotated)",
        fails=("test_apply_rotary", "test_llama_state_dict_to_course"))
def rotary_keys_forgotten(q, k, cos, sin):
    x1, x2 = q.chunk(2, dim=-1)
    return q * cos + torch.cat((-x2, x1), dim=-1) * sin, k


# --- repeat_kv ---------------------------------------------------------------------------------


@mutant("repeat_kv", "tiles the heads (x.repeat): query head h reads key/value head h % G",
        fails=("test_repeat_kv", "test_llama_state_dict_to_course"))
def repeat_kv_tiled(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


# --- split_c_attn ------------------------------------------------------------------------------


@mutant("split_c_attn", "splits c_attn in the order k, q, v",
        fails=("test_split_c_attn", "test_gpt2_state_dict_to_course"))
def c_attn_kqv_order(weight, bias, n_embd):
    (k_w, q_w, v_w), (k_b, q_b, v_b) = weight.split(n_embd, dim=1), bias.split(n_embd)
    return (q_w.t(), q_b), (k_w.t(), k_b), (v_w.t(), v_b)


@mutant("split_c_attn", "keeps Conv1D's (in, out) blocks: not transposed (square, so no shape error)",
        fails=("test_split_c_attn", "test_gpt2_state_dict_to_course"))
def c_attn_not_transposed(weight, bias, n_embd):
    return tuple(zip(weight.split(n_embd, dim=1), bias.split(n_embd)))


@mutant("split_c_attn", "splits the input axis (rows) instead of the output axis",
        fails=("test_split_c_attn", "test_gpt2_state_dict_to_course"))
def c_attn_split_rows(weight, bias, n_embd):
    return tuple((w, b) for w, b in zip(weight.t().split(n_embd, dim=1), bias.split(n_embd)))


# --- gpt2_state_dict_to_course -----------------------------------------------------------------


def _gpt2(sd, config, transpose_c_proj=True, swap_norms=False):
    """The reference conversion with switches for the bugs below."""
    def t(name):
        return sd["transformer." + name]

    state = {"tok_emb.weight": t("wte.weight"), "lm_head.weight": t("wte.weight"), "pos_emb.weight": t("wpe.weight"),
             "norm_f.weight": t("ln_f.weight"), "norm_f.bias": t("ln_f.bias")}
    for i in range(config.n_layer):
        theirs, ours = f"h.{i}.", f"blocks.{i}."
        norms = (("norm1", "ln_2"), ("norm2", "ln_1")) if swap_norms else (("norm1", "ln_1"), ("norm2", "ln_2"))
        for our_norm, their_norm in norms:
            for p in ("weight", "bias"):
                state[f"{ours}{our_norm}.{p}"] = t(f"{theirs}{their_norm}.{p}")
        qkv = split_c_attn(t(theirs + "attn.c_attn.weight"), t(theirs + "attn.c_attn.bias"), config.n_embd)
        for proj, (w, b) in zip(("q_proj", "k_proj", "v_proj"), qkv):
            state[f"{ours}attn.{proj}.weight"], state[f"{ours}attn.{proj}.bias"] = w, b
        c_proj = t(theirs + "attn.c_proj.weight")
        state[ours + "attn.o_proj.weight"] = c_proj.t() if transpose_c_proj else c_proj
        state[ours + "attn.o_proj.bias"] = t(theirs + "attn.c_proj.bias")
        for our_linear, their_conv in (("ff.linear1", "mlp.c_fc"), ("ff.linear2", "mlp.c_proj")):
            state[f"{ours}{our_linear}.weight"] = t(f"{theirs}{their_conv}.weight").t()
            state[f"{ours}{our_linear}.bias"] = t(f"{theirs}{their_conv}.bias")
    return state


@mutant("gpt2_state_dict_to_course", "attn.c_proj not transposed (it is square: no shape error)",
        fails=("test_gpt2_state_dict_to_course",))
def gpt2_c_proj_not_transposed(sd, config):
    return _gpt2(sd, config, transpose_c_proj=False)


@mutant("gpt2_state_dict_to_course", "ln_1 and ln_2 swapped", fails=("test_gpt2_state_dict_to_course",))
def gpt2_norms_swapped(sd, config):
    return _gpt2(sd, config, swap_norms=True)


# --- llama_state_dict_to_course ----------------------------------------------------------------


def _llama(sd, config, lm_head="config", swap_norms=False):
    """The reference conversion with switches for the bugs below."""
    embedding = sd["model.embed_tokens.weight"]
    tied = config.tie_word_embeddings if lm_head == "config" else lm_head == "embedding"
    state = {"tok_emb.weight": embedding, "norm_f.weight": sd["model.norm.weight"],
             "lm_head.weight": embedding if tied else sd["lm_head.weight"]}
    for i in range(config.num_hidden_layers):
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
        first, second = ("post_attention_layernorm", "input_layernorm") if swap_norms else \
            ("input_layernorm", "post_attention_layernorm")
        state[ours + "norm1.weight"] = sd[f"{theirs}{first}.weight"]
        state[ours + "norm2.weight"] = sd[f"{theirs}{second}.weight"]
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            state[f"{ours}attn.{proj}.weight"] = sd[f"{theirs}self_attn.{proj}.weight"]
        for proj in ("gate_proj", "up_proj", "down_proj"):
            state[f"{ours}ff.{proj}.weight"] = sd[f"{theirs}mlp.{proj}.weight"]
    return state


@mutant("llama_state_dict_to_course", "copies lm_head.weight instead of tying it to the embedding: a tied "
        "checkpoint has none", fails=("test_llama_state_dict_to_course",))
def llama_lm_head_copied(sd, config):
    return _llama(sd, config, lm_head="checkpoint")


@mutant("llama_state_dict_to_course", "always ties the output layer, even where the checkpoint has its own",
        fails=("test_llama_state_dict_to_course",))
def llama_always_tied(sd, config):
    return _llama(sd, config, lm_head="embedding")


@mutant("llama_state_dict_to_course", "input_layernorm and post_attention_layernorm swapped",
        fails=("test_llama_state_dict_to_course",))
def llama_norms_swapped(sd, config):
    return _llama(sd, config, swap_norms=True)
