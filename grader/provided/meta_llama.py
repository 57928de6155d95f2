# Meta's Llama as Meta's own reference code computes it (provided, read-only): the source of the checkpoints you
# load. A checkpoint (consolidated.00.pth) is a state dict with Meta's names; params.json holds the configuration.
# Nothing is downloaded: random_meta_checkpoint draws the weights of a small model from a seed.
import math

import torch
import torch.nn.functional as F


def meta_rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def meta_rotary(x, positions, inv_freq):
    """x (B, L, heads, d_head) in Meta's layout: dimensions 2i and 2i + 1 are the real and imaginary parts of one
    complex number, multiplied by exp(1j * position * inv_freq[i]), a turn by that angle."""
    angles = torch.outer(positions.to(inv_freq.dtype), inv_freq)                  # (L, d_head / 2)
    turn = torch.polar(torch.ones_like(angles), angles)[:, None, :]              # (L, 1, d_head / 2), complex
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))       # (B, L, heads, d_head / 2)
    return torch.view_as_real(pairs * turn).flatten(-2).type_as(x)


@torch.no_grad()
def meta_llama_logits(sd, params, ids, inv_freq=None):
    """Logits (B, L, vocab_size) of Meta's Llama with weights `sd` and configuration `params` on token ids (B, L),
    recomputed from scratch (no cache). `inv_freq` (d_head / 2,): the rotary frequency of each pair; by default
    rope_theta ** (-2i / d_head). Meta's code rescales them when params["use_scaled_rope"] is true; this reference
    leaves that to you and refuses such params unless it is given the frequencies."""
    dim, n_heads, eps = params["dim"], params["n_heads"], params["norm_eps"]
    n_kv_heads, d_head = params.get("n_kv_heads") or n_heads, dim // n_heads
    if inv_freq is None:
        if params.get("use_scaled_rope"):
            raise ValueError("params say use_scaled_rope: pass the rescaled frequencies as inv_freq")
        inv_freq = 1.0 / params.get("rope_theta", 10000.0) ** (torch.arange(0, d_head, 2).float() / d_head)
    batch, length = ids.shape
    positions, inv_freq = torch.arange(length, device=ids.device), inv_freq.to(ids.device)
    future = torch.ones(length, length, dtype=torch.bool, device=ids.device).triu(1)
    h = sd["tok_embeddings.weight"][ids]                                          # (B, L, dim)
    for i in range(params["n_layers"]):
        def weight(name, i=i):
            return sd[f"layers.{i}.{name}.weight"]

        x = meta_rms_norm(h, weight("attention_norm"), eps)
        q = F.linear(x, weight("attention.wq")).view(batch, length, n_heads, d_head)
        k = F.linear(x, weight("attention.wk")).view(batch, length, n_kv_heads, d_head)
        v = F.linear(x, weight("attention.wv")).view(batch, length, n_kv_heads, d_head)
        q, k = meta_rotary(q, positions, inv_freq), meta_rotary(k, positions, inv_freq)
        k, v = (t.repeat_interleave(n_heads // n_kv_heads, dim=2) for t in (k, v))   # GQA: adjacent copies
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))                             # (B, heads, L, d_head)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d_head)).masked_fill(future, float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, length, dim)
        h = h + F.linear(out, weight("attention.wo"))
        x = meta_rms_norm(h, weight("ffn_norm"), eps)
        h = h + F.linear(F.silu(F.linear(x, weight("feed_forward.w1"))) * F.linear(x, weight("feed_forward.w3")),
                         weight("feed_forward.w2"))
    return F.linear(meta_rms_norm(h, sd["norm.weight"], eps), sd["output.weight"])


def random_meta_checkpoint(params, hidden_dim, seed):
    """A checkpoint in Meta's layout for `params`, SwiGLU width `hidden_dim`, weights drawn from `seed`: a matrix
    N(0, 1) / sqrt(its smaller side), a norm's gain 1 + N(0, 0.1**2). On the device where new tensors go."""
    dim, n_heads, vocab = params["dim"], params["n_heads"], params["vocab_size"]
    kv_dim = (params.get("n_kv_heads") or n_heads) * (dim // n_heads)
    shapes = {"tok_embeddings.weight": (vocab, dim), "norm.weight": (dim,), "output.weight": (vocab, dim)}
    for i in range(params["n_layers"]):
        shapes.update({f"layers.{i}.attention.wq.weight": (dim, dim), f"layers.{i}.attention.wk.weight": (kv_dim, dim),
                       f"layers.{i}.attention.wv.weight": (kv_dim, dim), f"layers.{i}.attention.wo.weight": (dim, dim),
                       f"layers.{i}.feed_forward.w1.weight": (hidden_dim, dim),
                       f"layers.{i}.feed_forward.w2.weight": (dim, hidden_dim),
                       f"layers.{i}.feed_forward.w3.weight": (hidden_dim, dim),
                       f"layers.{i}.attention_norm.weight": (dim,), f"layers.{i}.ffn_norm.weight": (dim,)})
    generator, device, sd = torch.Generator().manual_seed(seed), torch.empty(0).device, {}
    for name, shape in shapes.items():
        noise = torch.randn(shape, generator=generator)        # float32: a fifth of float64's cost to draw
        value = noise / math.sqrt(min(shape)) if len(shape) == 2 else 1.0 + 0.1 * noise
        sd[name] = value.to(device, torch.float32)
    return sd
