"""Correct alternatives for a1_self_attention: implementations that differ from the reference
solution wherever the task leaves a choice, each of which must keep every point.
`python -m grader check a1_self_attention` proves it (the dual of mutants/a1_self_attention.py)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.mutants import alternative

# --- scaled_dot_product_attention ------------------------------------------------------


@alternative("scaled_dot_product_attention", "einsum scores, torch.where mask, NaN rows zeroed with nan_to_num")
def einsum_where_nan_to_num(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)   # an all-blocked row is NaN: make it 0
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


@alternative("scaled_dot_product_attention", "q scaled before the product, finfo.min instead of -inf, "
                                             "blocked entries zeroed by multiplying with the mask")
def prescaled_finite_min(q, k, v, mask=None):
    q = q * (1.0 / math.sqrt(q.shape[-1]))
    scores = torch.matmul(q, k.transpose(-1, -2))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights * mask.to(weights.dtype)   # also zeroes the uniform rows of all-blocked queries
    return torch.matmul(weights, v), weights


@alternative("scaled_dot_product_attention", "additive -inf mask, hand-written max-subtracted softmax "
                                             "computed in float64 and cast back")
def additive_mask_float64(q, k, v, mask=None):
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=torch.float64, device=q.device).masked_fill(~mask, float("-inf"))
        scores = scores + bias
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    exps = torch.exp(scores - top)
    total = exps.sum(dim=-1, keepdim=True)
    weights = exps / torch.where(total == 0, torch.ones_like(total), total)
    return (weights @ v.double()).to(q.dtype), weights.to(q.dtype)


# --- attention_loop ----------------------------------------------------------------------


@alternative("attention_loop", "preallocated output with the input's dtype, index loop, softmax by hand")
def preallocated_index_loop(q, k, v):
    out = torch.empty(q.shape[0], v.shape[1], dtype=q.dtype, device=q.device)
    for i in range(q.shape[0]):
        scores = (q[i] * k).sum(dim=1) / math.sqrt(q.shape[1])   # (Lk,)
        exps = torch.exp(scores - scores.max())
        out[i] = (exps / exps.sum()) @ v
    return out


@alternative("attention_loop", "one query row at a time through the parallel function")
def loop_over_parallel_rows(q, k, v):
    return torch.cat([scaled_dot_product_attention(q[i:i + 1], k, v)[0] for i in range(len(q))])


@alternative("attention_loop", "a while loop over query indices: einsum scores, log-sum-exp softmax, "
                              "(1, dv) rows joined with torch.cat")
def while_loop_logsumexp(q, k, v):
    rows, i = [], 0
    while i < q.size(0):
        scores = torch.einsum("d,kd->k", q[i], k) * q.size(1) ** -0.5
        weights = torch.exp(scores - torch.logsumexp(scores, dim=0))
        rows.append((weights[:, None] * v).sum(dim=0, keepdim=True))
        i += 1
    return torch.cat(rows, dim=0)


# --- SelfAttention -------------------------------------------------------------------------


@alternative("SelfAttention", "projections created in another order, F.linear with their weights, "
                              "keys/values source chosen by an if")
class projections_reordered(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        if d_v is None:
            d_v = d_k
        self.d_k, self.d_v = d_k, d_v
        self.v_proj = nn.Linear(d_model, d_v, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.q_proj = nn.Linear(d_model, d_k, bias=False)

    def forward(self, x, context=None, mask=None):
        if context is None:
            context = x
        q = F.linear(x, self.q_proj.weight)
        k = F.linear(context, self.k_proj.weight)
        v = F.linear(context, self.v_proj.weight)
        return scaled_dot_product_attention(q, k, v, mask=mask)


# --- sinusoidal_positional_encoding ------------------------------------------------------------


@alternative("sinusoidal_positional_encoding", "exp/log frequencies in float64, sin and cos interleaved "
                                               "with stack + flatten")
def exp_log_interleaved(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"sinusoidal encodings pair sin and cos columns: d_model must be even, not {d_model}")
    position = torch.arange(seq_len, dtype=torch.float64)[:, None]
    inverse_frequency = torch.exp(-math.log(base) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = position * inverse_frequency                                      # (L, d/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2).float()


@alternative("sinusoidal_positional_encoding", "plain Python loops with math.sin and math.cos")
def python_loops(seq_len, d_model, base=10000.0):
    if d_model % 2 == 1:
        raise ValueError("d_model must be even")
    rows = []
    for pos in range(seq_len):
        row = []
        for i in range(0, d_model, 2):
            angle = pos / base ** (i / d_model)
            row += [math.sin(angle), math.cos(angle)]
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(seq_len, d_model)


# --- LearnedPositionalEmbedding ------------------------------------------------------------------


@alternative("LearnedPositionalEmbedding", "table kept as `self.table`, rows sliced from its weight, "
                                           "position ids in a non-persistent buffer")
class sliced_table(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)
        self.register_buffer("position_ids", torch.arange(max_len), persistent=False)

    def forward(self, x):
        length = x.size(1)
        if length > self.table.num_embeddings:
            raise ValueError(f"got {length} positions, but this embedding knows only "
                             f"{self.table.num_embeddings} (max_len)")
        return x + self.table(self.position_ids[:length]).unsqueeze(0)


@alternative("LearnedPositionalEmbedding", "attribute `emb`, positions broadcast to (B, L) and looked up")
class batched_lookup(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.emb = nn.Embedding(max_len, d_model)

    def forward(self, x):
        batch, length, _ = x.shape
        if length > self.emb.weight.shape[0]:
            raise ValueError(f"sequence of {length} tokens is longer than max_len={self.emb.weight.shape[0]}")
        positions = torch.arange(length, device=x.device).expand(batch, length)
        return self.emb(positions) + x
