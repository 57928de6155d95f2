"""Correct alternatives for a6_real_models: each computes what the task asks, written differently from the
reference solution, and must keep every point (`python -m grader check a6_real_models`)."""
import re

import torch
import torch.nn.functional as F

from grader.mutants import alternative


@alternative("gelu_tanh", "PyTorch's own tanh GELU")
def gelu_builtin(x):
    return F.gelu(x, approximate="tanh")


@alternative("rms_norm", "sqrt and a division, computed in float64 and cast back")
def rms_norm_float64(x, weight, eps=1e-6):
    xd = x.to(torch.float64)
    return (xd / torch.sqrt((xd * xd).mean(dim=-1, keepdim=True) + eps) * weight.to(torch.float64)).to(x.dtype)


@alternative("swiglu", "one fused (2 d_ff, d) projection for gate and up, split with chunk")
def swiglu_fused(x, gate_proj, up_proj, down_proj):
    gate, up = (x @ torch.cat([gate_proj, up_proj]).T).chunk(2, dim=-1)
    return (gate * torch.sigmoid(gate) * up) @ down_proj.T


@alternative("rotary_cos_sin", "angles in float64, with torch.outer, cast to float32 at the end")
def rotary_cos_sin_float64(seq_len, head_dim, base=10000.0, offset=0, device=None):
    exponents = torch.arange(head_dim // 2, dtype=torch.float64, device=device) * 2 / head_dim
    angles = torch.outer(torch.arange(offset, offset + seq_len, dtype=torch.float64, device=device),
                         torch.pow(float(base), -exponents))
    angles = angles.repeat(1, 2)
    return angles.cos().float(), angles.sin().float()


@alternative("apply_rotary", "complex numbers: the halves permuted into (real, imaginary) pairs, multiplied by "
             "cos + i sin, and permuted back")
def apply_rotary_complex(q, k, cos, sin):
    half = cos.shape[-1] // 2
    complex_dtype = torch.complex128 if q.dtype == torch.float64 else torch.complex64
    turn = torch.complex(cos[..., :half].to(q.dtype), sin[..., :half].to(q.dtype)).to(complex_dtype)

    def rotate(x):
        pairs = torch.stack((x[..., :half], x[..., half:]), dim=-1).contiguous()      # (..., half, 2)
        turned = torch.view_as_real(torch.view_as_complex(pairs) * turn)             # (..., half, 2)
        return torch.cat((turned[..., 0], turned[..., 1]), dim=-1).to(x.dtype)

    return rotate(q), rotate(k)


@alternative("repeat_kv", "expand a new axis, then reshape (one copy, no repeat_interleave)")
def repeat_kv_expand(x, n_rep):
    batch, kv_heads, length, d = x.shape
    return x[:, :, None].expand(batch, kv_heads, n_rep, length, d).reshape(batch, kv_heads * n_rep, length, d)


@alternative("split_c_attn", "chunk, and the transpose written as an einsum")
def split_c_attn_einsum(weight, bias, n_embd):
    return tuple((torch.einsum("io->oi", w).contiguous(), b.clone())
                 for w, b in zip(weight.chunk(3, dim=1), bias.chunk(3)))


@alternative("gpt2_state_dict_to_course", "renames with regular expressions, every Conv1D transposed with einsum")
def gpt2_by_regex(sd, config):
    renames = [(r"transformer\.wte\.weight", "tok_emb.weight"), (r"transformer\.wpe\.weight", "pos_emb.weight"),
               (r"transformer\.ln_f\.(\w+)", r"norm_f.\1"),
               (r"transformer\.h\.(\d+)\.ln_1\.(\w+)", r"blocks.\1.norm1.\2"),
               (r"transformer\.h\.(\d+)\.ln_2\.(\w+)", r"blocks.\1.norm2.\2"),
               (r"transformer\.h\.(\d+)\.attn\.c_proj\.(\w+)", r"blocks.\1.attn.o_proj.\2"),
               (r"transformer\.h\.(\d+)\.mlp\.c_fc\.(\w+)", r"blocks.\1.ff.linear1.\2"),
               (r"transformer\.h\.(\d+)\.mlp\.c_proj\.(\w+)", r"blocks.\1.ff.linear2.\2")]
    state = {}
    for name, tensor in sd.items():
        layer = re.fullmatch(r"transformer\.h\.(\d+)\.attn\.c_attn\.(weight|bias)", name)
        if layer:
            parts = tensor.chunk(3, dim=-1)
            for proj, part in zip(("q_proj", "k_proj", "v_proj"), parts):
                state[f"blocks.{layer[1]}.attn.{proj}.{layer[2]}"] = (
                    torch.einsum("io->oi", part) if layer[2] == "weight" else part)
            continue
        for pattern, target in renames:
            if re.fullmatch(pattern, name):
                new = re.sub(pattern, target, name)
                conv1d = new.endswith("weight") and ("o_proj" in new or "linear" in new)
                state[new] = torch.einsum("io->oi", tensor) if conv1d else tensor
    state["lm_head.weight"] = state["tok_emb.weight"]
    return state


@alternative("llama_state_dict_to_course", "a table of name fragments applied to every key, clones of the tensors")
def llama_by_table(sd, config):
    fragments = [("model.embed_tokens.", "tok_emb."), ("model.norm.", "norm_f."), ("model.layers.", "blocks."),
                 (".input_layernorm.", ".norm1."), (".post_attention_layernorm.", ".norm2."),
                 (".self_attn.", ".attn."), (".mlp.", ".ff.")]
    state = {}
    for name, tensor in sd.items():
        for old, new in fragments:
            name = name.replace(old, new)
        state[name] = tensor.clone()
    if config.tie_word_embeddings or "lm_head.weight" not in state:
        state["lm_head.weight"] = state["tok_emb.weight"]
    return state
