"""Mutation catalogue for a1_self_attention: realistic wrong implementations, one bug each.
`python -m grader check a1_self_attention` proves every one of them loses points."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.mutants import mutant

# --- scaled_dot_product_attention ------------------------------------------------------


@mutant("scaled_dot_product_attention", "forgets to divide the scores by sqrt(d_k)")
def missing_scale(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "divides by d_k instead of sqrt(d_k)")
def scale_by_dk(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "softmax over the query axis instead of the key axis")
def softmax_over_queries(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "mask polarity inverted: blocks where the mask is True",
        fails=("test_sdpa_masks",))
def mask_polarity_inverted(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "fully blocked rows left as NaN (softmax of all -inf)",
        fails=("test_sdpa_masks",))
def fully_masked_rows_nan(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "masks with -1e9: fully blocked rows become uniform, not zero",
        fails=("test_sdpa_masks",))
def mask_with_large_negative(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)            # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)                 # blocked keys: weight ~0 after the softmax
    weights = torch.softmax(scores, dim=-1)                     # each row sums to 1
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "transposes fixed axes (0, 1) of k: breaks leading dimensions")
def transpose_fixed_axes(q, k, v, mask=None):
    k_t = k.transpose(0, 1) if k.dim() == 2 else k.transpose(1, 2)
    scores = q @ k_t / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "casts to float32: float64 inputs lose their dtype")
def forces_float32(q, k, v, mask=None):
    q, k, v = q.float(), k.float(), v.float()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v, weights


@mutant("scaled_dot_product_attention", "calls torch's built-in attention (forbidden)",
        fails=("test_sdpa_no_builtin_attention",))
def uses_builtin_sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


# --- attention_loop ----------------------------------------------------------------------


@mutant("attention_loop", "preallocates the output with torch.zeros: float64 becomes float32",
        fails=("test_attention_loop",))
def loop_default_dtype(q, k, v):
    out = torch.zeros(q.shape[0], v.shape[1])
    for i in range(q.shape[0]):
        weights = torch.softmax(k @ q[i] / math.sqrt(q.shape[1]), dim=0)
        out[i] = weights @ v
    return out


@mutant("attention_loop", "forgets the 1/sqrt(d_k) scale in the loop", fails=("test_attention_loop",))
def loop_missing_scale(q, k, v):
    rows = []
    for query in q:                                   # query: (dk,)
        scores = k @ query                            # (Lk,)
        weights = torch.softmax(scores, dim=0)        # (Lk,)
        rows.append(weights @ v)                      # (dv,)
    return torch.stack(rows)


@mutant("attention_loop", "not a loop: the matrix form softmax(q @ k.T / sqrt(d_k)) @ v (right numbers, "
        "the task asked for one query at a time)", fails=("test_attention_loop",))
def vectorised_not_a_loop(q, k, v):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1) @ v


@mutant("attention_loop", "loops over the keys (an online softmax), not over the queries",
        fails=("test_attention_loop",))
def loops_over_keys(q, k, v):
    scores = q @ k.T / math.sqrt(q.shape[-1])                   # (Lq, Lk)
    top = scores.max(dim=1, keepdim=True).values
    total = torch.zeros(q.shape[0], 1, dtype=q.dtype)
    out = torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype)
    for j in range(k.shape[0]):
        weight = torch.exp(scores[:, j:j + 1] - top)
        total = total + weight
        out = out + weight * v[j]
    return out / total


# --- SelfAttention ------------------------------------------------------------------------


@mutant("SelfAttention", "cross-attention ignored: keys and values always from x",
        fails=("test_cross_attention",))
class context_ignored(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x, context=None, mask=None):
        q = self.q_proj(x)               # (B, Lq, d_k)
        k = self.k_proj(x)               # (B, Lk, d_k)
        v = self.v_proj(x)               # (B, Lk, d_v)
        return scaled_dot_product_attention(q, k, v, mask)


@mutant("SelfAttention", "values projected with k_proj (copy-paste slip)")
class values_from_key_projection(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        return scaled_dot_product_attention(self.q_proj(x), self.k_proj(source), self.k_proj(source), mask)


@mutant("SelfAttention", "projections with bias (nn.Linear's default)")
class projections_with_bias(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_k)
        self.k_proj = nn.Linear(d_model, d_k)
        self.v_proj = nn.Linear(d_model, d_k if d_v is None else d_v)

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        return scaled_dot_product_attention(self.q_proj(x), self.k_proj(source), self.v_proj(source), mask)


@mutant("SelfAttention", "mask accepted but not passed on to attention", fails=("test_self_attention_module",
                                                                                 "test_cross_attention"))
class mask_dropped(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        return scaled_dot_product_attention(self.q_proj(x), self.k_proj(source), self.v_proj(source))


# --- sinusoidal_positional_encoding -------------------------------------------------------


def _angles(seq_len, d_model, base, first_position=0, exponent_step=2):
    positions = torch.arange(first_position, first_position + seq_len, dtype=torch.float32).unsqueeze(1)
    i = torch.arange(d_model // 2, dtype=torch.float32)
    return positions * base ** (-exponent_step * i / d_model)


@mutant("sinusoidal_positional_encoding", "sin and cos swapped (cos in even columns)",
        fails=("test_sinusoidal_encoding",))
def sin_cos_swapped(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = _angles(seq_len, d_model, base)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(angles), torch.sin(angles)
    return pe


@mutant("sinusoidal_positional_encoding", "positions counted from 1", fails=("test_sinusoidal_encoding",))
def one_indexed_positions(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = _angles(seq_len, d_model, base, first_position=1)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


@mutant("sinusoidal_positional_encoding", "exponent i/d_model instead of 2i/d_model",
        fails=("test_sinusoidal_encoding",))
def exponent_without_two(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = _angles(seq_len, d_model, base, exponent_step=1)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


@mutant("sinusoidal_positional_encoding", "the table computed and returned in float64 (the task asks for float32)",
        fails=("test_sinusoidal_encoding",))
def table_in_float64(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = _angles(seq_len, d_model, base).double()
    pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


@mutant("sinusoidal_positional_encoding", "base argument ignored (10000 hard-coded)",
        fails=("test_sinusoidal_encoding",))
def base_ignored(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = _angles(seq_len, d_model, 10000.0)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


@mutant("sinusoidal_positional_encoding", "no ValueError for odd d_model (last column silently dropped)",
        fails=("test_sinusoidal_encoding",))
def odd_d_model_accepted(seq_len, d_model, base=10000.0):
    angles = _angles(seq_len, d_model, base)
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0:2 * (d_model // 2):2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


# --- LearnedPositionalEmbedding ----------------------------------------------------------


@mutant("LearnedPositionalEmbedding", "no length check: L > max_len gives an IndexError deep inside",
        fails=("test_learned_positional_embedding",))
class no_length_check(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        return x + self.embedding(torch.arange(x.shape[1], device=x.device))


@mutant("LearnedPositionalEmbedding", "returns the position embeddings instead of adding them to x",
        fails=("test_learned_positional_embedding",))
class replaces_instead_of_adding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        if x.shape[1] > self.max_len:
            raise ValueError("too long")
        return self.embedding(torch.arange(x.shape[1], device=x.device)).expand_as(x)


@mutant("LearnedPositionalEmbedding", "off by one: uses rows 1..L, and rejects L == max_len",
        fails=("test_learned_positional_embedding",))
class positions_from_one(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len >= self.max_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_len={self.max_len}")
        positions = torch.arange(1, seq_len + 1, device=x.device)   # (L,)
        return x + self.embedding(positions)                        # (B, L, d) + (L, d)
