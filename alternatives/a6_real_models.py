"""Correct alternatives for a6_real_models: each computes what the task asks, written differently from the
reference solution (Meta's style, Hugging Face's style, other precisions and other idioms), and must keep every
point (`python -m grader check a6_real_models`)."""
import math
import re

import torch

from grader.mutants import alternative

# --- llama_ffn_width ---------------------------------------------------------------------------


@alternative("llama_ffn_width", "Hugging Face's conversion script: math.ceil of the ratio")
def ffn_width_ceil(dim, multiple_of, ffn_dim_multiplier=None):
    width = int(8 * dim / 3)
    width = int(width * (ffn_dim_multiplier if ffn_dim_multiplier is not None else 1.0))
    return multiple_of * math.ceil(width / multiple_of)


@alternative("llama_ffn_width", "integers only: floor division and a negated floor for the rounding up")
def ffn_width_integers(dim, multiple_of, ffn_dim_multiplier=None):
    width = 8 * dim // 3
    if ffn_dim_multiplier is not None:
        width = math.floor(ffn_dim_multiplier * width)
    return -(-width // multiple_of) * multiple_of


# --- llama3_inv_freq ---------------------------------------------------------------------------


@alternative("llama3_inv_freq", "Meta's first llama3 code: a Python loop over the frequencies, a new tensor of the "
             "input's dtype and device")
def llama3_meta_loop(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    low_freq_wavelen = original_max_len / low_freq_factor
    high_freq_wavelen = original_max_len / high_freq_factor
    new_freqs = []
    for freq in inv_freq.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / factor)
        else:
            smooth = (original_max_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            new_freqs.append((1 - smooth) * freq / factor + smooth * freq)
    return torch.tensor(new_freqs, dtype=inv_freq.dtype, device=inv_freq.device)


@alternative("llama3_inv_freq", "Hugging Face's style: divide the slow band first, then a medium-band mask built "
             "from two negated comparisons")
def llama3_hf_style(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    low_freq_wavelen = original_max_len / low_freq_factor
    high_freq_wavelen = original_max_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (original_max_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


@alternative("llama3_inv_freq", "float32 inside whatever the input's dtype, a multiplier per pair clamped to "
             "[1/factor, 1], cast back at the end")
def llama3_float32_clamped(inv_freq, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_len=8192):
    theta = inv_freq.to(torch.float32)
    gamma = (original_max_len * theta / (2 * math.pi) - low_freq_factor) / (high_freq_factor - low_freq_factor)
    gamma = gamma.clamp(0.0, 1.0)                  # 0 for the slow pairs, 1 for the fast ones, the blend between
    return ((1 - gamma) / factor + gamma).mul(theta).to(inv_freq.dtype)


# --- rotary_cos_sin ----------------------------------------------------------------------------


@alternative("rotary_cos_sin", "Meta's complex numbers (torch.polar), their real and imaginary parts laid out in "
             "the rotate_half layout")
def rotary_complex(positions, d_head, base=10000.0, scaling=None):
    freqs = 1.0 / (base ** (torch.arange(0, d_head, 2, device="cpu")[: d_head // 2].float() / d_head))
    if scaling is not None:
        if scaling["rope_type"] != "llama3":
            raise ValueError(f"unsupported rope_type {scaling['rope_type']!r}")
        freqs = llama3_inv_freq(freqs, factor=scaling["factor"], low_freq_factor=scaling["low_freq_factor"],
                                high_freq_factor=scaling["high_freq_factor"],
                                original_max_len=scaling["original_max_position_embeddings"])
    angles = torch.outer(positions.cpu().float(), freqs)                       # (L, d_head / 2)
    freqs_cis = torch.polar(torch.ones_like(angles), angles)                   # complex64
    cos, sin = freqs_cis.real.repeat(1, 2), freqs_cis.imag.repeat(1, 2)
    return cos.to(positions.device), sin.to(positions.device)


@alternative("rotary_cos_sin", "Hugging Face's style: an expanded batched matmul of frequencies and positions, "
             "emb = cat(freqs, freqs)")
def rotary_hf_style(positions, d_head, base=10000.0, scaling=None):
    inv_freq = 1.0 / (base ** (torch.arange(0, d_head, 2, dtype=torch.int64).to(positions.device, torch.float)
                               / d_head))
    rope_type = "default" if scaling is None else scaling.get("rope_type")
    if rope_type == "llama3":
        inv_freq = llama3_inv_freq(inv_freq, scaling["factor"], scaling["low_freq_factor"],
                                   scaling["high_freq_factor"], scaling["original_max_position_embeddings"])
    elif rope_type != "default":
        raise ValueError(f"rope_type {rope_type!r} is not implemented")
    inv_freq_expanded = inv_freq[None, :, None].float()                        # (1, d_head / 2, 1)
    position_ids_expanded = positions[None, None, :].float()                   # (1, 1, L)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)        # (1, L, d_head / 2)
    emb = torch.cat((freqs, freqs), dim=-1)[0]
    return emb.cos(), emb.sin()


@alternative("rotary_cos_sin", "angles in float64 (frequencies and positions), cast to float32 at the end")
def rotary_float64(positions, d_head, base=10000.0, scaling=None):
    exponents = torch.arange(d_head // 2, dtype=torch.float64, device=positions.device) * 2 / d_head
    inv_freq = float(base) ** -exponents
    if scaling is not None:
        if scaling.get("rope_type") != "llama3":
            raise ValueError("only the llama3 rescaling is implemented")
        inv_freq = llama3_inv_freq(inv_freq, scaling["factor"], scaling["low_freq_factor"],
                                   scaling["high_freq_factor"], scaling["original_max_position_embeddings"])
    angles = torch.outer(positions.to(torch.float64), inv_freq).repeat(1, 2)
    return angles.cos().float(), angles.sin().float()


# --- neighbours_to_halves ----------------------------------------------------------------------


@alternative("neighbours_to_halves", "an index of rows (lecture 3's to_halves for each head) and index_select")
def halves_by_index(weight, n_heads):
    d_head = weight.shape[0] // n_heads
    to_halves = torch.cat((torch.arange(0, d_head, 2), torch.arange(1, d_head, 2)))
    index = torch.cat([h * d_head + to_halves for h in range(n_heads)])
    return weight.index_select(0, index.to(weight.device))


@alternative("neighbours_to_halves", "a loop over the heads: even rows, then odd rows, concatenated")
def halves_by_slices(weight, n_heads):
    heads = weight.chunk(n_heads, dim=0)
    return torch.cat([torch.cat([head[0::2], head[1::2]]) for head in heads])


# --- meta_llama_config -------------------------------------------------------------------------


@alternative("meta_llama_config", "a dict of fields with setdefault for what params.json may leave out, n_kv_heads "
             "left None where params have none (the decoder reads None as n_heads)")
def config_from_defaults(params, max_len):
    p = dict(params)
    p.setdefault("n_kv_heads", None)
    p.setdefault("ffn_dim_multiplier", None)
    p.setdefault("rope_theta", 10000.0)
    p.setdefault("use_scaled_rope", False)
    scaling = None
    if p["use_scaled_rope"]:
        scaling = {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
                   "original_max_position_embeddings": 8192}
    fields = {"vocab_size": p["vocab_size"], "d_model": p["dim"], "n_heads": p["n_heads"], "n_layers": p["n_layers"],
              "d_ff": llama_ffn_width(p["dim"], p["multiple_of"], p["ffn_dim_multiplier"]), "max_len": max_len,
              "n_kv_heads": p["n_kv_heads"], "activation": "swiglu", "norm": "rmsnorm", "norm_eps": p["norm_eps"],
              "positions": "rotary", "rope_base": p["rope_theta"], "rope_scaling": scaling, "tied": False,
              "bias": False}
    return DecoderConfig(**fields)


# --- from_meta_llama ---------------------------------------------------------------------------


@alternative("from_meta_llama", "renames with regular expressions, reorders wq and wk by their own row counts, "
             "and builds the model on the checkpoint's device")
def meta_by_regex(sd, params, max_len):
    cfg = meta_llama_config(params, max_len)
    d_head = cfg.d_model // cfg.n_heads
    renames = [(r"tok_embeddings\.weight", "tok_emb.weight"), (r"norm\.weight", "norm_f.weight"),
               (r"output\.weight", "lm_head.weight"),
               (r"layers\.(\d+)\.attention_norm\.weight", r"blocks.\1.norm1.weight"),
               (r"layers\.(\d+)\.ffn_norm\.weight", r"blocks.\1.norm2.weight"),
               (r"layers\.(\d+)\.attention\.wq\.weight", r"blocks.\1.attn.q_proj.weight"),
               (r"layers\.(\d+)\.attention\.wk\.weight", r"blocks.\1.attn.k_proj.weight"),
               (r"layers\.(\d+)\.attention\.wv\.weight", r"blocks.\1.attn.v_proj.weight"),
               (r"layers\.(\d+)\.attention\.wo\.weight", r"blocks.\1.attn.o_proj.weight"),
               (r"layers\.(\d+)\.feed_forward\.w1\.weight", r"blocks.\1.ff.gate_proj.weight"),
               (r"layers\.(\d+)\.feed_forward\.w2\.weight", r"blocks.\1.ff.down_proj.weight"),
               (r"layers\.(\d+)\.feed_forward\.w3\.weight", r"blocks.\1.ff.up_proj.weight")]
    state = {}
    for name, tensor in sd.items():
        for pattern, target in renames:
            if re.fullmatch(pattern, name):
                new = re.sub(pattern, target, name)
                if new.endswith(("q_proj.weight", "k_proj.weight")):
                    tensor = neighbours_to_halves(tensor, tensor.shape[0] // d_head)
                state[new] = tensor.clone()
    model = Decoder(cfg)
    model.load_state_dict(state, strict=True)
    return model.to(sd["tok_embeddings.weight"].device).eval()


@alternative("from_meta_llama", "copies each weight in place into the model, through the names the task fixes")
def meta_copy_in_place(sd, params, max_len):
    cfg = meta_llama_config(params, max_len)
    model = Decoder(cfg).to(sd["tok_embeddings.weight"].device)
    pairs = [(model.tok_emb.weight, sd["tok_embeddings.weight"]), (model.norm_f.weight, sd["norm.weight"]),
             (model.lm_head.weight, sd["output.weight"])]
    for i, block in enumerate(model.blocks):
        meta = {name: sd[f"layers.{i}.{name}.weight"] for name in (
            "attention_norm", "ffn_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo",
            "feed_forward.w1", "feed_forward.w2", "feed_forward.w3")}
        pairs += [(block.norm1.weight, meta["attention_norm"]), (block.norm2.weight, meta["ffn_norm"]),
                  (block.attn.q_proj.weight, neighbours_to_halves(meta["attention.wq"], cfg.n_heads)),
                  (block.attn.k_proj.weight, neighbours_to_halves(meta["attention.wk"], cfg.kv_heads)),
                  (block.attn.v_proj.weight, meta["attention.wv"]), (block.attn.o_proj.weight, meta["attention.wo"]),
                  (block.ff.gate_proj.weight, meta["feed_forward.w1"]),
                  (block.ff.up_proj.weight, meta["feed_forward.w3"]),
                  (block.ff.down_proj.weight, meta["feed_forward.w2"])]
    with torch.no_grad():
        for parameter, value in pairs:
            parameter.copy_(value)
    return model.eval()
