# Lecture 9's decoder (provided, read-only): the same code as the lecture, function for function. With its defaults
# it is assignment 2's DecoderOnlyLM; the options switch on GPT-2's and Llama's differences; lecture 8's KV cache
# comes with it. Its attention calls YOUR rotary_cos_sin: write and run that cell before you run a model.
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu_tanh(x):
    # GPT-2's GELU: x * Phi(x), Phi the Gaussian CDF approximated with a tanh ("gelu_new")
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))              # the gain g; there is no bias

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rotate_half(x):
    """(x1, x2) halves -> (-x2, x1): dimension i is paired with i + d/2 (GPT-NeoX, Hugging Face LLaMA)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin):
    # x (B, H, L, d_head): each pair (x_i, x_{i + d/2}) turned by its angle
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    # (B, G, L, d_head) -> (B, G * n_rep, L, d_head): query head h reads key/value head h // n_rep
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=1)


class PreallocKVCache:
    # one key and one value buffer for all layers, allocated once; a step writes only its new positions
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        shape = (n_layers, batch_size, n_heads, max_len, d_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length, self.max_len = 0, max_len
        self.allocations, self.bytes_written = 2, 0

    def append(self, layer, k_new, v_new):
        end = self.length + k_new.shape[2]
        if end > self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; {end} requested")
        self.k[layer, :, :, self.length:end] = k_new            # in place
        self.v[layer, :, :, self.length:end] = v_new
        self.bytes_written += k_new.nbytes + v_new.nbytes
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]   # views: nothing is copied

    def advance(self, n):                                       # after every layer appended its n new positions
        if self.length + n > self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; {self.length + n} requested")
        self.length += n


@dataclass
class DecoderConfig:
    vocab_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    max_len: int
    n_kv_heads: int = None        # key/value heads G; None: as many as query heads (multi-head attention)
    activation: str = "relu"      # "relu", "gelu_tanh" or "swiglu"
    norm: str = "layernorm"       # "layernorm" or "rmsnorm"
    norm_eps: float = 1e-5
    positions: str = "learned"    # "learned" (added to the input) or "rotary" (applied to q and k in attention)
    rope_base: float = 10000.0
    rope_scaling: dict = None     # Llama 3.1's rescaling of the rotary frequencies (a dict: rope_of), or None
    tied: bool = False            # the output layer is the token embedding
    bias: bool = True             # biases in the attention and feed-forward projections

    @property
    def kv_heads(self):
        return self.n_kv_heads or self.n_heads


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = cfg.n_heads, cfg.kv_heads, cfg.d_model // cfg.n_heads
        self.rotary, self.rope_base, self.rope_scaling = cfg.positions == "rotary", cfg.rope_base, cfg.rope_scaling
        self.q_proj = nn.Linear(cfg.d_model, self.n_heads * self.d_head, bias=cfg.bias)
        self.k_proj = nn.Linear(cfg.d_model, self.n_kv_heads * self.d_head, bias=cfg.bias)   # G heads only
        self.v_proj = nn.Linear(cfg.d_model, self.n_kv_heads * self.d_head, bias=cfg.bias)
        self.o_proj = nn.Linear(self.n_heads * self.d_head, cfg.d_model, bias=cfg.bias)

    def forward(self, x, cache=None, layer=0):
        B, L, _ = x.shape

        def split(t, heads):                                      # (B, L, heads * d_head) -> (B, heads, L, d_head)
            return t.view(B, L, heads, self.d_head).transpose(1, 2)

        q = split(self.q_proj(x), self.n_heads)
        k, v = split(self.k_proj(x), self.n_kv_heads), split(self.v_proj(x), self.n_kv_heads)
        past = 0 if cache is None else cache.length
        if self.rotary:                                           # turn q and k by their positions past, ...
            positions = torch.arange(past, past + L, device=x.device)
            cos, sin = rotary_cos_sin(positions, self.d_head, self.rope_base, self.rope_scaling)
            q, k = apply_rotary(q, cos.to(q.dtype), sin.to(q.dtype)), apply_rotary(k, cos.to(k.dtype), sin.to(k.dtype))
        if cache is not None:
            k, v = cache.append(layer, k, v)                      # (B, G, past + L, d_head), keys already turned
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)           # (B, H, past + L, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        q_pos = torch.arange(past, past + L, device=x.device)[:, None]
        k_pos = torch.arange(past + L, device=x.device)[None, :]
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))  # causal mask
        out = scores.softmax(dim=-1) @ v                           # (B, H, L, d_head)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, self.n_heads * self.d_head))


class FeedForward(nn.Module):
    # a2's feed-forward network (linear1, linear2), with ReLU or GPT-2's GELU between
    def __init__(self, d_model, d_ff, activation="relu", bias=True):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff, bias=bias), nn.Linear(d_ff, d_model, bias=bias)
        self.act = {"relu": F.relu, "gelu_tanh": gelu_tanh}[activation]

    def forward(self, x):
        return self.linear2(self.act(self.linear1(x)))


def make_norm(cfg):
    return RMSNorm(cfg.d_model, cfg.norm_eps) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


class DecoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.attn, self.norm2 = make_norm(cfg), Attention(cfg), make_norm(cfg)
        self.ff = (SwiGLU(cfg.d_model, cfg.d_ff, cfg.bias) if cfg.activation == "swiglu"
                   else FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias))

    def forward(self, x, cache=None, layer=0):                    # pre-norm, as in a2
        x = x + self.attn(self.norm1(x), cache, layer)
        return x + self.ff(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg, self.max_len = cfg, cfg.max_len
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = make_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.tok_emb.weight              # one Parameter, used twice

    def make_cache(self, batch_size, max_len=None):
        weight = self.tok_emb.weight
        return PreallocKVCache(self.cfg.n_layers, batch_size, self.cfg.kv_heads, self.cfg.d_model // self.cfg.n_heads,
                               max_len or self.max_len, dtype=weight.dtype, device=weight.device)

    def forward(self, ids, cache=None):                            # ids: (B, L), only the NEW tokens when cached
        past = 0 if cache is None else cache.length
        if past + ids.shape[1] > self.max_len:
            raise ValueError(f"{past + ids.shape[1]} positions exceed max_len={self.max_len}")
        x = self.tok_emb(ids)
        if self.pos_emb is not None:                               # learned positions: added once, here
            x = x + self.pos_emb(torch.arange(past, past + ids.shape[1], device=ids.device))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        if cache is not None:
            cache.advance(ids.shape[1])
        return self.lm_head(self.norm_f(x))                        # (B, L, vocab)


@torch.no_grad()
def generate_greedy(model, prompt, n_new, cache=None):
    # returns (ids (B, P + n_new), the logits that chose each new token (B, n_new, vocab))
    ids, chosen_logits = prompt, []
    for step in range(n_new):
        if cache is None:
            logits = model(ids)[:, -1]                          # recompute the whole prefix
        else:
            new_tokens = prompt if step == 0 else ids[:, -1:]   # prefill once, then one token per step
            logits = model(new_tokens, cache)[:, -1]
        chosen_logits.append(logits)
        ids = torch.cat([ids, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return ids, torch.stack(chosen_logits, dim=1)


class Weights:
    # a model's parameters by name, noting which were read: a conversion must use every one of them
    def __init__(self, hf_model):
        self.params, self.read = dict(hf_model.named_parameters()), set()

    def __call__(self, name):
        self.read.add(name)
        return self.params[name].detach()

    def build(self, cfg, state):
        unread = sorted(set(self.params) - self.read)
        if unread:
            raise ValueError(f"the conversion left out {unread}")
        model = Decoder(cfg).to(next(iter(self.params.values())).device)
        model.load_state_dict(state, strict=True)                  # strict: every parameter of ours gets a value
        return model.eval()


def rope_of(config):
    # (base, scaling): the rotary base, and Llama 3.1's "llama3" rescaling as a dict (None without); others refused
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return base, None
    if kind == "llama3":
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        return base, {"rope_type": "llama3", **{key: params[key] for key in keys}}
    raise ValueError(f"rotary scaling {params} is not implemented by the course's decoder")


def from_llama(hf):
    c = hf.config
    d_head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    if (c.hidden_act != "silu" or d_head * c.num_attention_heads != c.hidden_size
            or getattr(c, "attention_bias", False) or getattr(c, "mlp_bias", False)):
        raise ValueError("this Llama configuration uses an option the course's decoder does not implement")
    base, scaling = rope_of(c)
    cfg = DecoderConfig(vocab_size=c.vocab_size, d_model=c.hidden_size, n_heads=c.num_attention_heads,
                        n_layers=c.num_hidden_layers, d_ff=c.intermediate_size, max_len=c.max_position_embeddings,
                        n_kv_heads=c.num_key_value_heads, activation="swiglu", norm="rmsnorm", norm_eps=c.rms_norm_eps,
                        positions="rotary", rope_base=base, rope_scaling=scaling, tied=c.tie_word_embeddings,
                        bias=False)
    get = Weights(hf)
    state = {"tok_emb.weight": get("model.embed_tokens.weight"), "norm_f.weight": get("model.norm.weight"),
             "lm_head.weight": get("model.embed_tokens.weight" if cfg.tied else "lm_head.weight")}
    for i in range(c.num_hidden_layers):
        theirs, ours = f"model.layers.{i}.", f"blocks.{i}."
        state[ours + "norm1.weight"] = get(theirs + "input_layernorm.weight")
        state[ours + "norm2.weight"] = get(theirs + "post_attention_layernorm.weight")
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            state[f"{ours}attn.{proj}.weight"] = get(f"{theirs}self_attn.{proj}.weight")
        for proj in ("gate_proj", "up_proj", "down_proj"):
            state[f"{ours}ff.{proj}.weight"] = get(f"{theirs}mlp.{proj}.weight")
    return get.build(cfg, state)
