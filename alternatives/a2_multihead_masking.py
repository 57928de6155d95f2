"""Correct alternatives for a2_multihead_masking: implementations that differ from the reference
solution wherever the task leaves a choice, each of which must keep every point.
`python -m grader check a2_multihead_masking` proves it (the dual of mutants/a2_multihead_masking.py)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.mutants import alternative

# --- split_heads, merge_heads ------------------------------------------------------------


@alternative("split_heads", "reshape with -1 and permute instead of view and transpose")
def reshape_permute_split(x, n_heads):
    return x.reshape(x.shape[0], x.shape[1], n_heads, -1).permute(0, 2, 1, 3)


@alternative("merge_heads", "permute, contiguous, then view")
def permute_contiguous_merge(x):
    return x.permute(0, 2, 1, 3).contiguous().view(x.shape[0], x.shape[2], -1)


# --- causal_mask, padding_mask --------------------------------------------------------------


@alternative("causal_mask", "position comparison of two aranges")
def arange_comparison(seq_len, device=None):
    positions = torch.arange(seq_len, device=device)
    return positions[None, :] <= positions[:, None]        # key <= query


@alternative("causal_mask", "the complement of a strict upper triangle")
def not_strict_upper(seq_len, device=None):
    return ~torch.triu(torch.ones(seq_len, seq_len, device=device), diagonal=1).bool()


@alternative("padding_mask", "ne() and two unsqueezes")
def ne_unsqueeze(token_ids, pad_id):
    return token_ids.ne(pad_id).unsqueeze(1).unsqueeze(2)


# --- MultiHeadAttention ------------------------------------------------------------------------


@alternative("MultiHeadAttention", "o_proj created first; one fused q/k/v matmul for self-attention; "
                                   "attention written inline with einsum and an additive -inf mask")
class fused_inline_attention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)

    def _heads(self, t):
        batch, length, _ = t.shape
        return t.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

    def forward(self, query, key=None, value=None, mask=None):
        if key is None and value is None:          # self-attention: one product for q, k and v
            weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
            bias = None if self.q_proj.bias is None else torch.cat(
                [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
            q, k, v = F.linear(query, weight, bias).chunk(3, dim=-1)
        else:
            key = query if key is None else key
            value = key if value is None else value
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        self.last_attn_weights = weights
        out = torch.einsum("bhqk,bhkd->bqhd", weights, v).flatten(2)
        return self.o_proj(out)


# --- FeedForward, TransformerBlock -------------------------------------------------------------


@alternative("FeedForward", "layers kept in an nn.Sequential registered first, linear1/linear2 as aliases "
                            "into it (so PyTorch names the parameters net.0.weight, ...)")
class sequential_with_aliases(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))
        self.linear1, self.linear2 = self.net[0], self.net[3]

    def forward(self, x):
        return self.net(x)


@alternative("TransformerBlock", "PyTorch-style _sa_block/_ff_block helpers, post-norm branch first, no dropout module")
class helper_methods_block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.norm_first = norm_first
        self.p = dropout

    def _sa_block(self, x, mask):
        return F.dropout(self.attn(x, x, x, mask=mask), self.p, self.training)

    def _ff_block(self, x):
        return F.dropout(self.ff(x), self.p, self.training)

    def forward(self, x, mask=None):
        if not self.norm_first:
            x = self.norm1(x + self._sa_block(x, mask))
            return self.norm2(x + self._ff_block(x))
        x = x + self._sa_block(self.norm1(x), mask)
        return x + self._ff_block(self.norm2(x))


# --- DecoderOnlyLM, lm_loss --------------------------------------------------------------------


@alternative("DecoderOnlyLM", "position ids and the causal mask precomputed as buffers and sliced; "
                              "blocks appended in a loop; embeddings created in another order")
class buffered_positions_and_mask(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(TransformerBlock(d_model, n_heads, d_ff, dropout))
        self.norm_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("positions", torch.arange(max_len), persistent=False)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, ids):
        length = ids.size(1)
        if length > self.positions.numel():
            raise ValueError(f"{length} tokens do not fit: max_len is {self.positions.numel()}")
        x = self.tok_emb(ids) + self.pos_emb(self.positions[:length])
        for block in self.blocks:
            x = block(x, mask=self.mask[:length, :length])
        return self.lm_head(self.norm_f(x))


@alternative("lm_loss", "log_softmax and gather in float64, mean over the kept targets, cast back")
def gather_float64(logits, ids, ignore_index=None):
    log_probs = torch.log_softmax(logits[:, :-1].double(), dim=-1)
    targets = ids[:, 1:]
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    picked = log_probs.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return (-(picked * keep).sum() / keep.sum()).to(logits.dtype)


@alternative("lm_loss", "summed nll_loss divided by the number of kept targets, written with flatten")
def summed_nll(logits, ids, ignore_index=None):
    predictions = F.log_softmax(logits[:, :-1].flatten(0, 1), dim=-1)
    targets = ids[:, 1:].flatten()
    if ignore_index is None:
        return F.nll_loss(predictions, targets)
    kept = (targets != ignore_index).sum()
    return F.nll_loss(predictions, targets, ignore_index=ignore_index, reduction="sum") / kept
