"""Mutation catalogue for a6_real_models: realistic wrong implementations, one bug each.
`python -m grader check a6_real_models` proves every one of them loses points."""
import math

import torch

from grader.mutants import mutant

# --- llama_ffn_width ---------------------------------------------------------------------------


@mutant("llama_ffn_width", "rounds down to a multiple of multiple_of instead of up",
        fails=("test_llama_ffn_width", "test_meta_llama_config", "test_from_meta_llama",
               "test_cached_generation"))
def ffn_width_rounded_down(dim, multiple_of, ffn_dim_multiplier=None):
    width = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        width = int(ffn_dim_multiplier * width)
    return multiple_of * (width // multiple_of)


@mutant("llama_ffn_width", "rounds to the nearest multiple of multiple_of (right for the published models)",
        fails=("test_llama_ffn_width",))
def ffn_width_rounded_to_nearest(dim, multiple_of, ffn_dim_multiplier=None):
    width = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        width = int(ffn_dim_multiplier * width)
    return multiple_of * round(width / multiple_of)


@mutant("llama_ffn_width", "rounds up first and applies ffn_dim_multiplier to the rounded width",
        fails=("test_llama_ffn_width", "test_meta_llama_config", "test_from_meta_llama",
               "test_cached_generation"))
def ffn_width_multiplier_after_rounding(dim, multiple_of, ffn_dim_multiplier=None):
    width = int(2 * 4 * dim / 3)
    width = multiple_of * ((width + multiple_of - 1) // multiple_of)
    return int(ffn_dim_multiplier * width) if ffn_dim_multiplier is not None else width


@mutant("llama_ffn_width", "ignores ffn_dim_multiplier (Llama 2 7B's rule for every model)",
        fails=("test_llama_ffn_width", "test_meta_llama_config", "test_from_meta_llama",
               "test_cached_generation"))
def ffn_width_multiplier_ignored(dim, multiple_of, ffn_dim_multiplier=None):
    width = int(2 * 4 * dim / 3)
    return multiple_of * ((width + multiple_of - 1) // multiple_of)


# --- llama3_inv_freq ---------------------------------------------------------------------------


def _bands(inv_freq, wavelength, factor, low_freq_factor, high_freq_factor, original_max_len):
    """The three bands with a given wavelength (the bugs below compute it, or the blend, their own way)."""
    gamma = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - gamma) * inv_freq / factor + gamma * inv_freq
    scaled = torch.where(wavelength > original_max_len / low_freq_factor, inv_freq / factor, blended)
    return torch.where(wavelength < original_max_len / high_freq_factor, inv_freq, scaled)


@mutant("llama3_inv_freq", "the wavelength taken as 1 / theta, forgetting the 2 pi",
        fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def llama3_wavelength_without_two_pi(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_len=8192):
    return _bands(inv_freq, 1.0 / inv_freq, factor, low_freq_factor, high_freq_factor, original_max_len)


@mutant("llama3_inv_freq", "every frequency divided by the factor (plain position interpolation)",
        fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def llama3_every_pair_slowed(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    return inv_freq / factor


@mutant("llama3_inv_freq", "no blend: the pairs between the thresholds keep their frequency",
        fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def llama3_no_blend(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    wavelength = 2 * math.pi / inv_freq
    return torch.where(wavelength > original_max_len / low_freq_factor, inv_freq / factor, inv_freq)


@mutant("llama3_inv_freq", "the blend's weights swapped: gamma on theta / factor, 1 - gamma on theta",
        fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def llama3_blend_swapped(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    wavelength = 2 * math.pi / inv_freq
    gamma = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = gamma * inv_freq / factor + (1 - gamma) * inv_freq
    scaled = torch.where(wavelength > original_max_len / low_freq_factor, inv_freq / factor, blended)
    return torch.where(wavelength < original_max_len / high_freq_factor, inv_freq, scaled)


@mutant("llama3_inv_freq", "the thresholds swapped: C / low_freq_factor for the fast pairs, C / high_freq_factor "
        "for the slow ones", fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_from_meta_llama",
                             "test_cached_generation"))
def llama3_thresholds_swapped(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    wavelength = 2 * math.pi / inv_freq
    gamma = (original_max_len / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - gamma) * inv_freq / factor + gamma * inv_freq
    scaled = torch.where(wavelength > original_max_len / high_freq_factor, inv_freq / factor, blended)
    return torch.where(wavelength < original_max_len / low_freq_factor, inv_freq, scaled)


@mutant("llama3_inv_freq", "Llama 3.1's numbers hard-coded (factor 8, 1, 4, 8192) whatever the arguments say",
        fails=("test_llama3_inv_freq", "test_rotary_cos_sin", "test_cached_generation"))
def llama3_arguments_ignored(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    return _bands(inv_freq, 2 * math.pi / inv_freq, 8.0, 1.0, 4.0, 8192)


@mutant("llama3_inv_freq", "float64 frequencies returned as float32 (a float32 tensor made inside)",
        fails=("test_llama3_inv_freq",))
def llama3_always_float32(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    theta = inv_freq.float()
    return _bands(theta, 2 * math.pi / theta, factor, low_freq_factor, high_freq_factor, original_max_len)


# --- rotary_cos_sin ----------------------------------------------------------------------------


def _angles(positions, d_head, base, scaling):
    """The reference's frequencies (rescaled as the dict says) times the positions: (L, d_head / 2)."""
    inv_freq = 1.0 / base ** (torch.arange(0, d_head, 2, device=positions.device).float() / d_head)
    if scaling is not None:
        inv_freq = llama3_inv_freq(inv_freq, scaling["factor"], scaling["low_freq_factor"],
                                   scaling["high_freq_factor"], scaling["original_max_position_embeddings"])
    return positions.float()[:, None] * inv_freq[None, :]


@mutant("rotary_cos_sin", "positions 0, ..., L-1 whatever positions says: the cache's offset is lost",
        fails=("test_rotary_cos_sin", "test_cached_generation"))
def rotary_positions_from_zero(positions, d_head, base=10000.0, scaling=None):
    angles = _angles(torch.arange(len(positions), device=positions.device), d_head, base, scaling)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "the scaling dict is ignored: plain frequencies always",
        fails=("test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def rotary_scaling_ignored(positions, d_head, base=10000.0, scaling=None):
    angles = _angles(positions, d_head, base, None)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "the scaling dict's numbers ignored: llama3_inv_freq with its defaults (Llama 3.1's)",
        fails=("test_rotary_cos_sin", "test_cached_generation"))
def rotary_scaling_defaults(positions, d_head, base=10000.0, scaling=None):
    angles = _angles(positions, d_head, base, None)
    if scaling is not None:
        inv_freq = 1.0 / base ** (torch.arange(0, d_head, 2, device=positions.device).float() / d_head)
        angles = positions.float()[:, None] * llama3_inv_freq(inv_freq)[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "any rope_type computed as llama3, no ValueError", fails=("test_rotary_cos_sin",))
def rotary_any_rope_type(positions, d_head, base=10000.0, scaling=None):
    if scaling is not None:
        scaling = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, **scaling}
    angles = _angles(positions, d_head, base, scaling)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


@mutant("rotary_cos_sin", "each angle repeated in neighbouring columns (repeat_interleave): Meta's pairs (2i, 2i+1)",
        fails=("test_rotary_cos_sin", "test_from_meta_llama", "test_cached_generation"))
def rotary_angles_interleaved(positions, d_head, base=10000.0, scaling=None):
    angles = _angles(positions, d_head, base, scaling).repeat_interleave(2, dim=-1)
    return angles.cos(), angles.sin()


# --- neighbours_to_halves ----------------------------------------------------------------------


@mutant("neighbours_to_halves", "the inverse reordering (halves to neighbours): equal to the right one only for "
        "d_head = 4", fails=("test_neighbours_to_halves", "test_from_meta_llama", "test_cached_generation"))
def halves_to_neighbours(weight, n_heads):
    rows, d_in = weight.shape
    return weight.view(n_heads, 2, rows // n_heads // 2, d_in).transpose(1, 2).reshape(rows, d_in)


@mutant("neighbours_to_halves", "reorders the rows of the whole matrix, not head by head",
        fails=("test_neighbours_to_halves", "test_from_meta_llama", "test_cached_generation"))
def halves_across_heads(weight, n_heads):
    rows, d_in = weight.shape
    return weight.view(rows // 2, 2, d_in).transpose(0, 1).reshape(rows, d_in)


@mutant("neighbours_to_halves", "odd rows first, then even: every pair turned the other way",
        fails=("test_neighbours_to_halves", "test_from_meta_llama", "test_cached_generation"))
def halves_odd_first(weight, n_heads):
    rows, d_in = weight.shape
    return weight.view(n_heads, rows // n_heads // 2, 2, d_in).flip(2).transpose(1, 2).reshape(rows, d_in)


# --- meta_llama_config -------------------------------------------------------------------------


def _config(params, max_len, **changes):
    """The reference configuration with the fields a bug below changes."""
    fields = dict(vocab_size=params["vocab_size"], d_model=params["dim"], n_heads=params["n_heads"],
                  n_layers=params["n_layers"], max_len=max_len,
                  d_ff=llama_ffn_width(params["dim"], params["multiple_of"], params.get("ffn_dim_multiplier")),
                  n_kv_heads=params.get("n_kv_heads") or params["n_heads"], activation="swiglu", norm="rmsnorm",
                  norm_eps=params["norm_eps"], positions="rotary", rope_base=params.get("rope_theta", 10000.0),
                  rope_scaling=dict(LLAMA31_SCALING) if params.get("use_scaled_rope") else None, tied=False,
                  bias=False)
    fields.update(changes)
    return DecoderConfig(**fields)


@mutant("meta_llama_config", "rope_theta defaults to Llama 3's 500000 where params have none (Llama 1 and 2: 10000)",
        fails=("test_meta_llama_config", "test_from_meta_llama", "test_cached_generation"))
def config_base_defaults_to_llama3(params, max_len):
    return _config(params, max_len, rope_base=params.get("rope_theta", 500000.0))


@mutant("meta_llama_config", "use_scaled_rope ignored: no rescaling for Llama 3.1",
        fails=("test_meta_llama_config", "test_from_meta_llama", "test_cached_generation"))
def config_scaling_ignored(params, max_len):
    return _config(params, max_len, rope_scaling=None)


@mutant("meta_llama_config", "the SwiGLU width 4 * dim, as in the course's ReLU network",
        fails=("test_meta_llama_config", "test_from_meta_llama", "test_cached_generation"))
def config_width_four_d(params, max_len):
    return _config(params, max_len, d_ff=4 * params["dim"])


@mutant("meta_llama_config", "norm_eps left at the decoder's default 1e-5 whatever params say",
        fails=("test_meta_llama_config", "test_from_meta_llama"))
def config_norm_eps_default(params, max_len):
    return _config(params, max_len, norm_eps=1e-5)


# --- from_meta_llama ---------------------------------------------------------------------------


def _from_meta(sd, params, max_len, reorder_q=True, k_heads="kv", swap_w1_w3=False, swap_norms=False,
               reorder_v=False):
    """The reference conversion with switches for the bugs below."""
    cfg = meta_llama_config(params, max_len)
    state = {"tok_emb.weight": sd["tok_embeddings.weight"], "norm_f.weight": sd["norm.weight"],
             "lm_head.weight": sd["output.weight"]}
    for i in range(cfg.n_layers):
        theirs, ours = f"layers.{i}.", f"blocks.{i}."
        first, second = ("ffn_norm", "attention_norm") if swap_norms else ("attention_norm", "ffn_norm")
        state[ours + "norm1.weight"] = sd[f"{theirs}{first}.weight"]
        state[ours + "norm2.weight"] = sd[f"{theirs}{second}.weight"]
        wq, wk, wv = (sd[f"{theirs}attention.{name}.weight"] for name in ("wq", "wk", "wv"))
        state[ours + "attn.q_proj.weight"] = neighbours_to_halves(wq, cfg.n_heads) if reorder_q else wq
        state[ours + "attn.k_proj.weight"] = {"kv": neighbours_to_halves(wk, cfg.kv_heads) if reorder_q else wk,
                                              "q": neighbours_to_halves(wk, cfg.n_heads)}[k_heads]
        state[ours + "attn.v_proj.weight"] = neighbours_to_halves(wv, cfg.kv_heads) if reorder_v else wv
        state[ours + "attn.o_proj.weight"] = sd[theirs + "attention.wo.weight"]
        gate, up = ("w3", "w1") if swap_w1_w3 else ("w1", "w3")
        for course_name, meta_name in (("gate_proj", gate), ("up_proj", up), ("down_proj", "w2")):
            state[f"{ours}ff.{course_name}.weight"] = sd[f"{theirs}feed_forward.{meta_name}.weight"]
    model = Decoder(cfg).to(sd["tok_embeddings.weight"].device)
    model.load_state_dict(state, strict=True)
    return model.eval()


@mutant("from_meta_llama", "wq and wk loaded as Meta stores them: no reordering for rotate_half",
        fails=("test_from_meta_llama", "test_cached_generation"))
def meta_rows_not_reordered(sd, params, max_len):
    return _from_meta(sd, params, max_len, reorder_q=False)


@mutant("from_meta_llama", "wk reordered with n_heads heads instead of its n_kv_heads",
        fails=("test_from_meta_llama", "test_cached_generation"))
def meta_k_with_query_heads(sd, params, max_len):
    return _from_meta(sd, params, max_len, k_heads="q")


@mutant("from_meta_llama", "wv reordered too (values are never turned, and wo still expects Meta's order)",
        fails=("test_from_meta_llama", "test_cached_generation"))
def meta_v_reordered(sd, params, max_len):
    return _from_meta(sd, params, max_len, reorder_v=True)


@mutant("from_meta_llama", "w1 and w3 swapped: the SiLU on the up projection",
        fails=("test_from_meta_llama", "test_cached_generation"))
def meta_w1_w3_swapped(sd, params, max_len):
    return _from_meta(sd, params, max_len, swap_w1_w3=True)


@mutant("from_meta_llama", "attention_norm and ffn_norm swapped",
        fails=("test_from_meta_llama", "test_cached_generation"))
def meta_norms_swapped(sd, params, max_len):
    return _from_meta(sd, params, max_len, swap_norms=True)
