# The course's decoder with lecture 9's options (provided, read-only). With the defaults it is assignment 2's
# DecoderOnlyLM; the options switch on GPT-2's and Llama's differences. It calls YOUR gelu_tanh, rms_norm,
# swiglu, rotary_cos_sin, apply_rotary and repeat_kv, so run the cells above it first.
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class DecoderConfig:
    vocab_size: int
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    max_len: int
    n_kv_heads: int = None        # key/value heads G; None: as many as query heads
    activation: str = "relu"      # "relu", "gelu_tanh" or "swiglu"
    norm: str = "layernorm"       # "layernorm" or "rmsnorm"
    norm_eps: float = 1e-5
    positions: str = "learned"    # "learned" (added to the input) or "rotary" (applied to q and k)
    rope_base: float = 10000.0
    tied: bool = False            # the output layer is the token embedding
    bias: bool = True             # biases in the attention and feed-forward projections

    @property
    def kv_heads(self):
        return self.n_kv_heads or self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, activation="relu", bias=True):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.activation = activation

    def forward(self, x):
        hidden = self.linear1(x)
        return self.linear2(gelu_tanh(hidden) if self.activation == "gelu_tanh" else F.relu(hidden))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_head = cfg.n_heads, cfg.kv_heads, cfg.d_model // cfg.n_heads
        self.rotary, self.rope_base = cfg.positions == "rotary", cfg.rope_base
        self.q_proj = nn.Linear(cfg.d_model, self.n_heads * self.d_head, bias=cfg.bias)
        self.k_proj = nn.Linear(cfg.d_model, self.n_kv_heads * self.d_head, bias=cfg.bias)
        self.v_proj = nn.Linear(cfg.d_model, self.n_kv_heads * self.d_head, bias=cfg.bias)
        self.o_proj = nn.Linear(self.n_heads * self.d_head, cfg.d_model, bias=cfg.bias)

    def forward(self, x):
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.n_heads, self.d_head).transpose(1, 2)     # (B, H, L, d_head)
        k = self.k_proj(x).view(batch, length, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, G, L, d_head)
        v = self.v_proj(x).view(batch, length, self.n_kv_heads, self.d_head).transpose(1, 2)
        if self.rotary:
            cos, sin = rotary_cos_sin(length, self.d_head, base=self.rope_base, device=x.device)
            q, k = apply_rotary(q, k, cos.to(q.dtype), sin.to(q.dtype))
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)                                   # (B, H, L, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        out = scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, self.n_heads * self.d_head))


def make_norm(cfg):
    return RMSNorm(cfg.d_model, cfg.norm_eps) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)


class DecoderBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.norm1, self.attn, self.norm2 = make_norm(cfg), Attention(cfg), make_norm(cfg)
        self.ff = (SwiGLU(cfg.d_model, cfg.d_ff) if cfg.activation == "swiglu"
                   else FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias))

    def forward(self, x):                                        # pre-norm, as in assignment 2
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = make_norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tied:
            self.lm_head.weight = self.tok_emb.weight            # one Parameter, used twice

    def forward(self, ids):
        """ids: (B, L) token ids -> logits (B, L, vocab_size); always causal."""
        x = self.tok_emb(ids)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm_f(x))


def gpt2_course_config(config):
    """The DecoderConfig of a transformers GPT2Config."""
    return DecoderConfig(vocab_size=config.vocab_size, d_model=config.n_embd, n_heads=config.n_head,
                         n_layers=config.n_layer, d_ff=config.n_inner or 4 * config.n_embd,
                         max_len=config.n_positions, activation="gelu_tanh", norm_eps=config.layer_norm_epsilon,
                         tied=True)


def llama_course_config(config):
    """The DecoderConfig of a transformers LlamaConfig (the rotary base read from rope_parameters or rope_theta)."""
    rope = getattr(config, "rope_parameters", None) or {}
    base = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    return DecoderConfig(vocab_size=config.vocab_size, d_model=config.hidden_size,
                         n_heads=config.num_attention_heads, n_layers=config.num_hidden_layers,
                         d_ff=config.intermediate_size, max_len=config.max_position_embeddings,
                         n_kv_heads=config.num_key_value_heads, activation="swiglu", norm="rmsnorm",
                         norm_eps=config.rms_norm_eps, positions="rotary", rope_base=base,
                         tied=config.tie_word_embeddings, bias=False)
