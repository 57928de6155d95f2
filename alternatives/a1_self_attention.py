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


# --- more alternatives, written to look for tests that take points from correct work; these lost
# points until the tests were fixed: attention modules that keep the task's projections under a second name too,
# a float32 scale or softmax inside float64 attention ---


@alternative("scaled_dot_product_attention", "leading dims (of q, k, v and the mask) broadcast by hand, "
                                             "flattened to 3-D and multiplied with torch.bmm")
def bmm_flattened(q, k, v, mask=None):
    lq, lk, dk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    shapes = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
    if mask is not None:
        mask = mask.to(torch.bool)
        shapes.append(mask.shape[:-2] if mask.dim() >= 2 else torch.Size())
    lead = torch.broadcast_shapes(*shapes)
    q3 = q.expand(*lead, lq, dk).reshape(-1, lq, dk)
    k3 = k.expand(*lead, lk, dk).reshape(-1, lk, dk)
    v3 = v.expand(*lead, lk, dv).reshape(-1, lk, dv)
    scores = torch.bmm(q3, k3.transpose(1, 2)) / math.sqrt(dk)
    if mask is not None:
        m3 = mask.expand(*lead, lq, lk).reshape(-1, lq, lk)
        scores = scores.masked_fill(~m3, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = torch.where(m3.any(-1, keepdim=True), weights, torch.zeros_like(weights))
    else:
        weights = torch.softmax(scores, dim=-1)
    out = torch.bmm(weights, v3)
    return out.reshape(*lead, lq, dv), weights.reshape(*lead, lq, lk)


@alternative("scaled_dot_product_attention", "log_softmax then exp; NaN rows of fully blocked queries "
                                             "replaced by 0 with masked_fill(isnan)")
def log_softmax_exp(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        scores = scores.masked_fill(mask == False, float("-inf"))  # noqa: E712
    weights = torch.log_softmax(scores, dim=-1).exp()
    weights = weights.masked_fill(torch.isnan(weights), 0.0)
    return torch.matmul(weights, v), weights


@alternative("scaled_dot_product_attention", "multiplicative masking: exp(scores - row max) times the mask, "
                                             "normalised where the row total is positive")
def multiplicative_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    if mask is not None:
        exps = exps * mask
    total = exps.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, exps / total, torch.zeros_like(exps))
    return weights @ v, weights


@alternative("scaled_dot_product_attention", "q and k each scaled by d_k**-0.25, -1e9 fill, fully blocked "
                                             "rows zeroed after; extra keyword arguments accepted")
def quarter_power_neg1e9(q, k, v, mask=None, dropout_p=0.0, scale=None, **kwargs):
    factor = q.shape[-1] ** -0.25
    scores = (q * factor) @ (k * factor).transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True)
    return weights @ v, weights


@alternative("attention_loop", "double loop over queries and keys with torch.dot, output rows in a new_zeros "
                               "tensor")
def double_loop_dot(q, k, v):
    out = q.new_zeros(q.shape[0], v.shape[1])
    scale = math.sqrt(q.shape[1])
    for i in range(q.shape[0]):
        scores = torch.stack([torch.dot(q[i], k[j]) / scale for j in range(k.shape[0])])
        weights = torch.softmax(scores, dim=0)
        out[i] = weights @ v
    return out


@alternative("SelfAttention", "one fused F.linear on the concatenated weights for self-attention, "
                              "split by [d_k, d_k, d_v]; attention written inline; accepts **kwargs")
class fused_qkv(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.d_k = d_k
        self.d_v = d_k if d_v is None else d_v
        self.q_proj = nn.Linear(d_model, d_k, bias=False)
        self.k_proj = nn.Linear(d_model, d_k, bias=False)
        self.v_proj = nn.Linear(d_model, self.d_v, bias=False)

    def forward(self, x, context=None, mask=None, **kwargs):
        if context is None:
            w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight], dim=0)
            q, k, v = torch.split(F.linear(x, w), [self.d_k, self.d_k, self.d_v], dim=-1)
        else:
            q = x @ self.q_proj.weight.T
            k = context @ self.k_proj.weight.T
            v = context @ self.v_proj.weight.T
        q = q / math.sqrt(self.d_k)
        scores = torch.einsum("bqd,bkd->bqk", q, k)
        if mask is not None:
            scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return torch.einsum("bqk,bkd->bqd", weights, v), weights


@alternative("sinusoidal_positional_encoding", "the PyTorch-tutorial form: div_term = exp(arange(0, d, 2) * "
                                               "(-log(base) / d)) in float32, filled into torch.zeros")
def tutorial_exp_log_float32(seq_len, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(0, seq_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@alternative("sinusoidal_positional_encoding", "complex exponentials: torch.polar in float64, view_as_real "
                                               "gives (cos, sin), flipped to (sin, cos)")
def complex_polar(seq_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"odd d_model={d_model}")
    pos = torch.arange(seq_len, dtype=torch.float64)
    inv = 1.0 / (base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model))
    angle = torch.outer(pos, inv)
    z = torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(z).flip(-1).reshape(seq_len, d_model).to(torch.float32)


@alternative("LearnedPositionalEmbedding", "attribute `wpe`, rows sliced straight from the weight, "
                                           "limit read from num_embeddings, length from x.size(-2)")
class weight_slice(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.wpe = nn.Embedding(max_len, d_model)

    def forward(self, x):
        length = x.size(-2)
        if length > self.wpe.num_embeddings:
            raise ValueError(f"length {length} > max_len {self.wpe.num_embeddings}")
        return x + self.wpe.weight[:length].to(x.dtype)


@alternative("SelfAttention", "textbook names W_q, W_k, W_v registered first; q_proj, k_proj, v_proj are "
                              "aliases of the same nn.Linear modules (spec attributes all present)")
class textbook_names_aliased(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_v, bias=False)
        self.q_proj, self.k_proj, self.v_proj = self.W_q, self.W_k, self.W_v

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        return scaled_dot_product_attention(self.W_q(x), self.W_k(source), self.W_v(source), mask)


@alternative("scaled_dot_product_attention", "the common tutorial idiom scores / torch.sqrt(torch.tensor(d_k)) "
                                             "(a float32 0-dim scale); float32-level rounding inside, float64 kept")
def torch_sqrt_tensor_scale(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / torch.sqrt(torch.tensor(d_k))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)
    return torch.matmul(weights, v), weights


@alternative("scaled_dot_product_attention", "Hugging Face idiom: softmax with dtype=torch.float32, cast back "
                                             "to the query's dtype; float32-level rounding inside, float64 kept")
def hf_float32_softmax(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return torch.matmul(weights, v), weights


# --- in the styles of well-known projects (written here from the task text) ----------------------


class _FusedRows:
    """Rows [start, stop) of a fused projection, read and written like an nn.Linear: `.weight` and
    `.bias` are views into the fused layer's parameters, and calling it applies just those rows."""

    def __init__(self, fused, start, stop):
        self.fused, self.start, self.stop = fused, start, stop

    @property
    def weight(self):
        return self.fused.weight[self.start:self.stop]

    @property
    def bias(self):
        return None if self.fused.bias is None else self.fused.bias[self.start:self.stop]

    def __call__(self, x):
        return F.linear(x, self.weight, self.bias)


@alternative("SelfAttention", "d2l style: projections registered as W_q, W_k, W_v; q_proj, k_proj, v_proj are "
                              "read-only properties returning them (so PyTorch names the parameters W_q.weight, ...)")
class d2l_properties(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.W_q = nn.Linear(d_model, d_k, bias=False)
        self.W_k = nn.Linear(d_model, d_k, bias=False)
        self.W_v = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)

    @property
    def q_proj(self):
        return self.W_q

    @property
    def k_proj(self):
        return self.W_k

    @property
    def v_proj(self):
        return self.W_v

    def forward(self, x, context=None, mask=None):
        keys_values = x if context is None else context
        return scaled_dot_product_attention(self.W_q(x), self.W_k(keys_values), self.W_v(keys_values), mask)


@alternative("SelfAttention", "nanoGPT style: one fused c_attn projection of width 2 d_k + d_v; q_proj, k_proj, "
                              "v_proj are properties giving its row blocks (weights are views into c_attn)")
class nanogpt_fused_c_attn(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.d_k, self.d_v = d_k, d_k if d_v is None else d_v
        self.c_attn = nn.Linear(d_model, 2 * d_k + self.d_v, bias=False)

    @property
    def q_proj(self):
        return _FusedRows(self.c_attn, 0, self.d_k)

    @property
    def k_proj(self):
        return _FusedRows(self.c_attn, self.d_k, 2 * self.d_k)

    @property
    def v_proj(self):
        return _FusedRows(self.c_attn, 2 * self.d_k, 2 * self.d_k + self.d_v)

    def forward(self, x, context=None, mask=None):
        if context is None:
            q, k, v = self.c_attn(x).split([self.d_k, self.d_k, self.d_v], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(context), self.v_proj(context)
        return scaled_dot_product_attention(q, k, v, mask)


@alternative("SelfAttention", "LLMs-from-scratch style: W_query, W_key, W_value registered, q_proj, k_proj, v_proj "
                              "properties; scores scaled by keys.shape[-1] ** 0.5 and softmaxed in place of a call")
class from_scratch_w_query(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        self.W_query = nn.Linear(d_model, d_k, bias=False)
        self.W_key = nn.Linear(d_model, d_k, bias=False)
        self.W_value = nn.Linear(d_model, d_k if d_v is None else d_v, bias=False)

    q_proj = property(lambda self: self.W_query)
    k_proj = property(lambda self: self.W_key)
    v_proj = property(lambda self: self.W_value)

    def forward(self, x, context=None, mask=None):
        source = x if context is None else context
        queries, keys, values = self.W_query(x), self.W_key(source), self.W_value(source)
        attn_scores = queries @ keys.transpose(-2, -1)
        if mask is not None:
            attn_scores = attn_scores.masked_fill(~mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = torch.nan_to_num(attn_weights, nan=0.0)    # a query with every key blocked
        return attn_weights @ values, attn_weights


@alternative("attention_loop", "Hugging Face idiom inside the loop: each query's softmax taken with "
                               "dtype=torch.float32 and cast back to the input's dtype (float64 kept)")
def hf_float32_softmax_loop(q, k, v):
    rows = []
    for i in range(q.shape[0]):
        scores = torch.matmul(k, q[i]) / math.sqrt(q.shape[-1])
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        rows.append(torch.matmul(weights, v))
    return torch.stack(rows)


@alternative("scaled_dot_product_attention", "Annotated Transformer style: d_k = query.size(-1), scores masked "
                                             "with masked_fill(mask == 0, -1e9), scores.softmax(dim=-1); a fully "
                                             "blocked row (uniform under -1e9) zeroed afterwards")
def annotated_attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = torch.where(mask == 0, torch.tensor(-1e9, dtype=scores.dtype, device=scores.device), scores)
    p_attn = scores.softmax(dim=-1)
    if mask is not None:
        # -1e9 gives a row whose every key is blocked uniform weights; the task wants zeros there
        p_attn = p_attn * mask.any(dim=-1, keepdim=True)
    return torch.matmul(p_attn, value), p_attn


@alternative("SelfAttention", "Annotated Transformer style: the projections held in an nn.ModuleList `linears` "
                              "(query, key, value order) and applied with zip; q_proj, k_proj, v_proj index it")
class annotated_linears(nn.Module):
    def __init__(self, d_model, d_k, d_v=None):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        self.linears = nn.ModuleList([nn.Linear(d_model, d_k, bias=False), nn.Linear(d_model, d_k, bias=False),
                                      nn.Linear(d_model, d_v, bias=False)])

    q_proj = property(lambda self: self.linears[0])
    k_proj = property(lambda self: self.linears[1])
    v_proj = property(lambda self: self.linears[2])

    def forward(self, x, context=None, mask=None):
        memory = x if context is None else context
        query, key, value = [linear(t) for linear, t in zip(self.linears, (x, memory, memory))]
        return scaled_dot_product_attention(query, key, value, mask=mask)


@alternative("sinusoidal_positional_encoding", "Annotated Transformer style: a zero table filled by slices, "
                                               "pe[:, 0::2] = sin(position * div_term), pe[:, 1::2] = cos(...), "
                                               "div_term = exp(arange(0, d, 2) * -(log(base) / d))")
def annotated_pe_table(seq_len, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even to pair each sin column with a cos column, got {d_model}")
    pe = torch.zeros(seq_len, d_model)
    position = torch.arange(0, seq_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(base) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


@alternative("scaled_dot_product_attention", "x-transformers style: q scaled by dim_head ** -0.5 first, einsum "
                                             "'... i d, ... j d -> ... i j', blocked scores set to "
                                             "-finfo(dtype).max, blocked rows zeroed after the softmax")
def x_transformers_einsum(q, k, v, mask=None):
    scale = q.shape[-1] ** -0.5
    sim = torch.einsum("... i d, ... j d -> ... i j", q * scale, k)
    if mask is not None:
        mask_value = -torch.finfo(sim.dtype).max
        sim = torch.where(mask, sim, torch.full((), mask_value, dtype=sim.dtype, device=sim.device))
    attn = sim.softmax(dim=-1)
    if mask is not None:
        attn = torch.where(mask, attn, torch.zeros((), dtype=attn.dtype, device=attn.device))
    return torch.einsum("... i j, ... j d -> ... i d", attn, v), attn
