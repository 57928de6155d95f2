"""Correct alternatives for a2_multihead_masking: implementations that differ from the reference
solution wherever the task leaves a choice, each of which must keep every point.
`python -m grader check a2_multihead_masking` proves it (the dual of mutants/a2_multihead_masking.py)."""
import copy
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


# --- more alternatives, written to look for tests that take points from correct work; these lost
# points until the tests were fixed: modules kept under a second name too (out_proj, fc1/fc2,
# ln_1/ln_2, nanoGPT's wte/wpe/h/ln_f), a loss taken in float32 ---


@alternative("split_heads", "chunk the feature axis into heads and stack them on a new axis 1 (a copy)")
def chunk_stack_split(x, n_heads):
    return torch.stack(x.chunk(n_heads, dim=-1), dim=1)


@alternative("merge_heads", "unbind the head axis and concatenate the heads along the features")
def unbind_cat_merge(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


@alternative("causal_mask", "nested Python lists of key <= query booleans turned into a tensor on device")
def python_list_causal(seq_len, device=None):
    return torch.tensor([[key <= query for key in range(seq_len)] for query in range(seq_len)],
                        dtype=torch.bool, device=device)


@alternative("padding_mask", "(ids - pad_id).bool(): non-zero difference means a real token; reshape")
def difference_bool_padding(token_ids, pad_id):
    batch, length = token_ids.shape
    return (token_ids - pad_id).bool().reshape(batch, 1, 1, length)


@alternative("MultiHeadAttention", "explicit loop over heads with slices of the projection outputs, own "
                                   "attention (-1e9 fill, blocked rows zeroed), weights stacked and detached")
class per_head_loop(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("n_heads must divide d_model")
        self.d_model, self.h = d_model, n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None):
        if key is None:
            key = query
        if value is None:
            value = key
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        dh = self.d_model // self.h
        outs, all_weights = [], []
        for head in range(self.h):
            sl = slice(head * dh, (head + 1) * dh)
            scores = q[..., sl] @ k[..., sl].transpose(-2, -1) / math.sqrt(dh)   # (B, Lq, Lk)
            if mask is not None:
                m = mask.expand(q.shape[0], self.h, q.shape[1], k.shape[1])[:, head]   # (B, Lq, Lk)
                scores = scores.masked_fill(~m, -1e9)
                w = scores.softmax(-1) * m.any(-1, keepdim=True)
            else:
                w = scores.softmax(-1)
            all_weights.append(w)
            outs.append(w @ v[..., sl])
        self.last_attn_weights = torch.stack(all_weights, dim=1).detach()
        return self.o_proj(torch.cat(outs, dim=-1))


@alternative("MultiHeadAttention", "queries scaled before the split, bool mask turned into an additive "
                                   "finfo.min bias of the scores' dtype, 2-D masks unsqueezed to 4-D")
class additive_bias_prescaled(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"{d_model} is not a multiple of {n_heads}")
        self.num_heads = n_heads
        self.head_dim = d_model // n_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)

    def _shape(self, t):
        return t.view(t.size(0), t.size(1), self.num_heads, self.head_dim).permute(0, 2, 1, 3).contiguous()

    def forward(self, query, key=None, value=None, mask=None):
        key = key if key is not None else query
        value = value if value is not None else key
        q = self._shape(self.q_proj(query) * self.scaling)
        k = self._shape(self.k_proj(key))
        v = self._shape(self.v_proj(value))
        scores = torch.matmul(q, k.transpose(2, 3))
        if mask is not None:
            if mask.dim() == 2:
                mask = mask[None, None]
            bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
            bias = bias.masked_fill(~mask, torch.finfo(scores.dtype).min)
            scores = scores + bias
        weights = F.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights * mask.any(dim=-1, keepdim=True)
        self.last_attn_weights = weights
        out = torch.matmul(weights, v).permute(0, 2, 1, 3).contiguous()
        return self.o_proj(out.view(out.size(0), out.size(1), -1))


@alternative("FeedForward", "nn.ReLU(inplace=True) kept as `act`, dropout as `drop`, layers created in "
                            "reverse order")
class inplace_relu(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear2 = nn.Linear(d_ff, d_model)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.act = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x):
        h = self.linear1(x)
        h = self.act(h)
        h = self.drop(h)
        return self.linear2(h)


@alternative("TransformerBlock", "PyTorch-style dropout1/dropout2, attention called with (h, h, h, mask) "
                                 "positionally, flag kept as `pre_norm`, norms created first")
class two_dropouts(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.pre_norm = bool(norm_first)

    def forward(self, x, mask=None):
        if self.pre_norm:
            h = self.norm1(x)
            x = x + self.dropout1(self.attn(h, h, h, mask))
            h = self.norm2(x)
            return x + self.dropout2(self.ff(h))
        x = self.norm1(x + self.dropout1(self.attn(x, x, x, mask)))
        x = self.norm2(x + self.dropout2(self.ff(x)))
        return x


@alternative("DecoderOnlyLM", "GPT-2 style: normal(0, 0.02) init drawn with self.apply, dropout after the "
                              "embeddings, positions sliced from the weight with a broadcast batch axis, a "
                              "(1, 1, L, L) causal mask, lm_head created first")
class gpt2_style(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff, dropout=dropout) for _ in range(n_layers))
        self.norm_f = nn.LayerNorm(d_model)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids, **kwargs):
        batch, length = ids.size()
        if length > self.pos_emb.num_embeddings:
            raise ValueError(f"cannot forward a sequence of length {length}, max_len is {self.pos_emb.num_embeddings}")
        x = self.drop(self.tok_emb(ids) + self.pos_emb.weight[:length].unsqueeze(0))
        mask = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril().view(1, 1, length, length)
        for i in range(len(self.blocks)):
            x = self.blocks[i](x, mask=mask)
        x = self.norm_f(x)
        return self.lm_head(x)


@alternative("lm_loss", "F.cross_entropy on (B, V, L-1) logits (class axis 1) and (B, L-1) targets")
def transpose_cross_entropy(logits, ids, ignore_index=None):
    kwargs = {} if ignore_index is None else {"ignore_index": ignore_index}
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], **kwargs)


@alternative("lm_loss", "boolean indexing of the kept targets, logsumexp minus the gathered logit, mean")
def logsumexp_boolean_index(logits, ids, ignore_index=None):
    z = logits[:, :-1]
    t = ids[:, 1:]
    keep = torch.ones_like(t, dtype=torch.bool) if ignore_index is None else t != ignore_index
    z, t = z[keep], t[keep]                                   # (N, V), (N,)
    nll = torch.logsumexp(z, dim=-1) - z.gather(1, t[:, None]).squeeze(1)
    return nll.mean()


class _OutProjAttention(nn.Module):
    """The forward of the two entries below, which keep the output projection under two names
    (`o_proj`, `out_proj`) and differ only in which one is registered first."""

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.q_proj(query), self.n_heads)
        k = split_heads(self.k_proj(key), self.n_heads)
        v = split_heads(self.v_proj(value), self.n_heads)
        out, self.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(merge_heads(out))


@alternative("MultiHeadAttention", "output projection created as `out_proj` (nn.MultiheadAttention's name), "
                                   "o_proj an alias of it")
class out_proj_alias(_OutProjAttention):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = self.out_proj


@alternative("FeedForward", "layers created as fc1/fc2, linear1/linear2 aliases of them")
class fc_aliases(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.linear1, self.linear2 = self.fc1, self.fc2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


@alternative("TransformerBlock", "GPT-2 names ln_1/ln_2 registered first, norm1/norm2 aliases of them")
class ln_aliases(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ln_2 = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = self.ln_1, self.ln_2
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.dropout(self.attn(self.ln_1(x), mask=mask))
            return x + self.dropout(self.ff(self.ln_2(x)))
        x = self.ln_1(x + self.dropout(self.attn(x, mask=mask)))
        return self.ln_2(x + self.dropout(self.ff(x)))


@alternative("DecoderOnlyLM", "nanoGPT names wte/wpe/h/ln_f registered first; tok_emb, pos_emb, blocks, "
                              "norm_f aliases of the same modules")
class nanogpt_aliases(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.h = nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb, self.pos_emb, self.blocks, self.norm_f = self.wte, self.wpe, self.h, self.ln_f
        self.max_len = max_len

    def forward(self, ids):
        length = ids.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
        x = self.wte(ids) + self.wpe(torch.arange(length, device=ids.device))
        mask = causal_mask(length, device=ids.device)
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


@alternative("MultiHeadAttention", "o_proj created first, then kept under a second name `out_proj` too "
                                   "(guards a fix of the alias tie-break that simply prefers the last name)")
class o_proj_then_alias(_OutProjAttention):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = self.o_proj


@alternative("lm_loss", "logits upcast with .float() before the loss (common LLM idiom); "
                        "float64 logits then give a float32 loss")
def float_upcast(logits, ids, ignore_index=None):
    logits = logits.float()
    V = logits.size(-1)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1),
                           ignore_index=-100 if ignore_index is None else ignore_index)


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


@alternative("MultiHeadAttention", "d2l style: projections registered as W_q, W_k, W_v, W_o; q_proj, k_proj, "
                                   "v_proj, o_proj are read-only properties returning them; heads split with "
                                   "reshape + permute")
class d2l_properties(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.num_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.last_attn_weights = None

    @property
    def q_proj(self):
        return self.W_q

    @property
    def k_proj(self):
        return self.W_k

    @property
    def v_proj(self):
        return self.W_v

    @property
    def o_proj(self):
        return self.W_o

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        return X.permute(0, 2, 1, 3)

    def transpose_output(self, X):
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        queries = self.transpose_qkv(self.W_q(query))
        keys = self.transpose_qkv(self.W_k(key))
        values = self.transpose_qkv(self.W_v(value))
        output, self.last_attn_weights = scaled_dot_product_attention(queries, keys, values, mask)
        return self.W_o(self.transpose_output(output))


@alternative("MultiHeadAttention", "nanoGPT style: one fused c_attn (d_model -> 3 d_model) split for "
                                   "self-attention, output c_proj; q_proj, k_proj, v_proj are properties giving "
                                   "c_attn's row blocks (views), o_proj a property returning c_proj")
class nanogpt_fused_c_attn(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_head, self.n_embd = n_heads, d_model
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.c_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attn_weights = None

    q_proj = property(lambda self: _FusedRows(self.c_attn, 0, self.n_embd))
    k_proj = property(lambda self: _FusedRows(self.c_attn, self.n_embd, 2 * self.n_embd))
    v_proj = property(lambda self: _FusedRows(self.c_attn, 2 * self.n_embd, 3 * self.n_embd))
    o_proj = property(lambda self: self.c_proj)

    def forward(self, query, key=None, value=None, mask=None):
        B, T, C = query.size()
        if key is None and value is None:
            q, k, v = self.c_attn(query).split(self.n_embd, dim=2)
        else:
            key = query if key is None else key
            value = key if value is None else value
            q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, k.size(1), self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, v.size(1), self.n_head, C // self.n_head).transpose(1, 2)
        y, self.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


@alternative("MultiHeadAttention", "Annotated Transformer style: four deep-copied nn.Linear in an nn.ModuleList "
                                   "`linears` (the copies start equal), zipped with (query, key, value); the task's "
                                   "names are properties indexing into it")
class annotated_linears(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_k, self.h = d_model // n_heads, n_heads
        layer = nn.Linear(d_model, d_model, bias=bias)
        self.linears = nn.ModuleList([copy.deepcopy(layer) for _ in range(4)])
        self.attn = None

    q_proj = property(lambda self: self.linears[0])
    k_proj = property(lambda self: self.linears[1])
    v_proj = property(lambda self: self.linears[2])
    o_proj = property(lambda self: self.linears[3])
    last_attn_weights = property(lambda self: self.attn)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = scaled_dot_product_attention(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


@alternative("DecoderOnlyLM", "LLMs-from-scratch style: tok_emb, pos_emb, drop_emb, trf_blocks, final_norm, "
                              "out_head registered; blocks, norm_f, lm_head are properties returning them")
class from_scratch_gpt_model(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.context_length = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop_emb = nn.Dropout(dropout)
        self.trf_blocks = nn.ModuleList(
            [TransformerBlock(d_model, n_heads, d_ff, dropout, norm_first=True) for _ in range(n_layers)])
        self.final_norm = nn.LayerNorm(d_model)
        self.out_head = nn.Linear(d_model, vocab_size, bias=False)

    blocks = property(lambda self: self.trf_blocks)
    norm_f = property(lambda self: self.final_norm)
    lm_head = property(lambda self: self.out_head)

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        if seq_len > self.context_length:
            raise ValueError(f"sequence length {seq_len} exceeds the context length {self.context_length}")
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(tok_embeds + pos_embeds)
        mask = causal_mask(seq_len, device=in_idx.device)
        for block in self.trf_blocks:
            x = block(x, mask)
        return self.out_head(self.final_norm(x))


@alternative("lm_loss", "Hugging Face causal-LM loss style: labels shifted by padding them on the right with the "
                        "ignore index, logits flattened with .view(-1, V) after an upcast with .float()")
def hf_view_loss(logits, ids, ignore_index=None):
    ignore = -100 if ignore_index is None else ignore_index
    logits = logits.float()
    labels = F.pad(ids, (0, 1), value=ignore)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, logits.size(-1))
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(logits, shift_labels, ignore_index=ignore, reduction="mean")


# --- causal masks kept in buffers named like weights (nanoGPT's and GPT-2's `bias`): the tests seed and load
# only the parameters of the layers the task names, never a buffer ----------------------------------------


@alternative("DecoderOnlyLM", "nanoGPT style: the causal mask a float buffer named `bias`, "
                              "torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len), on the model; "
                              "a query may attend where bias[:, :, :L, :L] == 1")
class nanogpt_bias_buffer(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.block_size = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.norm_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, idx):
        b, t = idx.size()
        if t > self.block_size:
            raise ValueError(f"Cannot forward sequence of length {t}, block size is only {self.block_size}")
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(0, t, dtype=torch.long, device=idx.device))
        for block in self.blocks:
            x = block(x, self.bias[:, :, :t, :t] == 1)
        return self.lm_head(self.norm_f(x))


@alternative("DecoderOnlyLM", "GPT-2 style (Hugging Face's GPT2Attention): every block holds its own causal mask, a "
                              "bool buffer named `bias` (1, 1, max_len, max_len), with `masked_bias` beside it; the "
                              "model a `mask` buffer of the positions; each block attends with its own "
                              "bias[:, :, :L, :L]")
class gpt2_block_bias_buffers(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            block = TransformerBlock(d_model, n_heads, d_ff, dropout)
            block.register_buffer("bias", torch.tril(torch.ones((max_len, max_len), dtype=torch.bool)).view(
                1, 1, max_len, max_len), persistent=False)
            block.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
            self.blocks.append(block)
        self.norm_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.register_buffer("mask", torch.ones(max_len, dtype=torch.bool), persistent=False)   # positions that exist

    def forward(self, input_ids):
        length = input_ids.shape[-1]
        if length > self.mask.numel():
            raise ValueError(f"input length {length} exceeds n_positions {self.mask.numel()}")
        position_ids = torch.arange(length, device=input_ids.device)[self.mask[:length]]
        hidden_states = self.tok_emb(input_ids) + self.pos_emb(position_ids)
        for block in self.blocks:
            hidden_states = block(hidden_states, block.bias[:, :, :length, :length])
        return self.lm_head(self.norm_f(hidden_states))


@alternative("MultiHeadAttention", "Hugging Face eager attention: scores by torch.matmul, the mask as an additive bias "
                                   "of the dtype's minimum, softmax(..., dtype=torch.float32).to(query.dtype), "
                                   "fully masked rows zeroed")
class hf_eager_float32_softmax(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"embed_dim must be divisible by num_heads (got {d_model} and {n_heads})")
        self.num_heads, self.head_dim = n_heads, d_model // n_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attn_weights = None

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        bsz = query.shape[0]

        def shape(t):
            return t.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = shape(self.q_proj(query)), shape(self.k_proj(key)), shape(self.v_proj(value))
        attn_weights = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        if mask is not None:
            attn_weights = attn_weights + torch.zeros_like(attn_weights).masked_fill(~mask, torch.finfo(q.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        if mask is not None:
            attn_weights = attn_weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        self.last_attn_weights = attn_weights
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).reshape(bsz, -1, self.num_heads * self.head_dim)
        return self.o_proj(attn_output)
