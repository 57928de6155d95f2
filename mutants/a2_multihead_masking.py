"""Mutation catalogue for a2_multihead_masking: realistic wrong implementations, one bug each.
`python -m grader check a2_multihead_masking` proves every one of them loses points.

Mutants run in the notebook's namespace, so they may use the notebook's names
(scaled_dot_product_attention, split_heads, causal_mask, MultiHeadAttention, ...) at call time.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.mutants import mutant

# Shared, correct parts. Each mutant below writes out only the code its bug lives in and takes the
# rest from here, so the bug is the one thing to read in it.


class _MHA(nn.Module):
    """MultiHeadAttention's correct constructor (check=False skips the divisibility check)."""

    def __init__(self, d_model, n_heads, bias=True, check=True):
        super().__init__()
        if check and d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attn_weights = None


def _qkv(module, query, key, value):
    """The correct defaults (key = query, value = key), projected and split into heads."""
    key = query if key is None else key
    value = key if value is None else value
    return (split_heads(module.q_proj(query), module.n_heads), split_heads(module.k_proj(key), module.n_heads),
            split_heads(module.v_proj(value), module.n_heads))


def _mha_forward(module, query, key=None, value=None, mask=None):
    """The correct forward."""
    q, k, v = _qkv(module, query, key, value)
    out, module.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
    return module.o_proj(merge_heads(out))


class _Block(nn.Module):
    """TransformerBlock's correct constructor."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)


class _LM(nn.Module):
    """DecoderOnlyLM's correct constructor (norm_first is passed on to every block)."""

    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0, norm_first=True):
        super().__init__()
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            [TransformerBlock(d_model, n_heads, d_ff, dropout, norm_first=norm_first) for _ in range(n_layers)])
        self.norm_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)


def _embed(module, ids):
    """The correct length check, token and position embeddings."""
    length = ids.shape[1]
    if length > module.max_len:
        raise ValueError("sequence too long")
    return module.tok_emb(ids) + module.pos_emb(torch.arange(length, device=ids.device))


def _causal_blocks(module, x):
    """Every block, with the causal mask."""
    mask = causal_mask(x.shape[1], device=x.device)
    for block in module.blocks:
        x = block(x, mask)
    return x


def _lm_forward(module, ids):
    """The correct forward."""
    return module.lm_head(module.norm_f(_causal_blocks(module, _embed(module, ids))))


# --- split_heads / merge_heads ------------------------------------------------------------


@mutant("split_heads", "views straight to (B, H, L, D/H) without the transpose: tokens mixed into heads",
        fails=("test_split_merge_heads", "test_mha_values"))
def split_view_no_transpose(x, n_heads):
    batch, length, d_model = x.shape
    return x.view(batch, n_heads, length, d_model // n_heads)


@mutant("merge_heads", "reshapes (B, H, L, Dh) to (B, L, D) without transposing back",
        fails=("test_split_merge_heads", "test_mha_values"))
def merge_without_transpose(x):
    batch, n_heads, length, d_head = x.shape
    return x.reshape(batch, length, n_heads * d_head)


# --- masks ----------------------------------------------------------------------------------


@mutant("causal_mask", "strict lower triangle: a token may not attend to itself",
        fails=("test_causal_mask",))
def causal_mask_strict(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril(-1)


@mutant("causal_mask", "upper triangle (transposed): every token sees the future, not the past",
        fails=("test_causal_mask", "test_lm_values_and_causality", "test_lm_training"))
def causal_mask_transposed(seq_len, device=None):
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu()


@mutant("causal_mask", "float 0/1 mask instead of a boolean one", fails=("test_causal_mask",))
def causal_mask_float(seq_len, device=None):
    return torch.ones(seq_len, seq_len, device=device).tril()


@mutant("padding_mask", "polarity inverted: True at the pad tokens", fails=("test_padding_mask",))
def padding_mask_inverted(token_ids, pad_id):
    return (token_ids == pad_id)[:, None, None, :]


@mutant("padding_mask", "shape (B, 1, L): no head axis, so it does not broadcast over (B, H, Lq, Lk)",
        fails=("test_padding_mask",))
def padding_mask_three_dims(token_ids, pad_id):
    return (token_ids != pad_id)[:, None, :]


@mutant("padding_mask", "shape (B, 1, L, 1): blocks padding *queries* instead of keys",
        fails=("test_padding_mask",))
def padding_mask_on_queries(token_ids, pad_id):
    return (token_ids != pad_id)[:, None, :, None]


@mutant("padding_mask", "pad id hard-coded to 0", fails=("test_padding_mask",))
def padding_mask_pad_zero(token_ids, pad_id):
    return (token_ids != 0)[:, None, None, :]


# --- MultiHeadAttention -------------------------------------------------------------------


@mutant("MultiHeadAttention", "scores scaled by sqrt(d_model) instead of sqrt(d_head)", fails=("test_mha_values",))
class mha_scale_by_d_model(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        q, k, v = _qkv(self, query, key, value)
        scores = q @ k.transpose(-2, -1) / math.sqrt(query.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        self.last_attn_weights = weights
        return self.o_proj(merge_heads(weights @ v))


@mutant("MultiHeadAttention", "ignores key/value: always self-attention", fails=("test_mha_shapes_and_errors",
                                                                                 "test_mha_cross_attention"))
class mha_always_self(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        q = split_heads(self.q_proj(query), self.n_heads)
        k = split_heads(self.k_proj(query), self.n_heads)
        v = split_heads(self.v_proj(query), self.n_heads)
        out, self.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
        return self.o_proj(merge_heads(out))


@mutant("MultiHeadAttention", "value defaults to query instead of key: mha(x, memory) reads values from x",
        fails=("test_mha_cross_attention",))
class mha_value_defaults_to_query(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = query if value is None else value
        return _mha_forward(self, query, key, value, mask)


@mutant("MultiHeadAttention", "no ValueError: d_model // n_heads silently truncates",
        fails=("test_mha_shapes_and_errors",))
class mha_no_divisibility_check(_MHA):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__(d_model, n_heads, bias, check=False)

    forward = _mha_forward


@mutant("MultiHeadAttention", "stores the weights averaged over heads (B, Lq, Lk)",
        fails=("test_mha_shapes_and_errors", "test_mha_values"))
class mha_averaged_weights(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        q, k, v = _qkv(self, query, key, value)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        self.last_attn_weights = weights.mean(dim=1)
        return self.o_proj(merge_heads(out))


@mutant("MultiHeadAttention", "unsqueezes every mask at dim 1 (assumes (B, Lq, Lk) masks): (B, 1, 1, Lk) breaks",
        fails=("test_mha_values",))
class mha_mask_unsqueezed(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        return _mha_forward(self, query, key, value, mask)


@mutant("MultiHeadAttention", "forgets the output projection o_proj", fails=("test_mha_values",))
class mha_no_output_projection(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        q, k, v = _qkv(self, query, key, value)
        out, self.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
        return merge_heads(out)


@mutant("MultiHeadAttention", "calls torch's built-in scaled_dot_product_attention (forbidden)",
        fails=("test_no_builtin_attention",))
class mha_uses_builtin_sdpa(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        q, k, v = _qkv(self, query, key, value)
        _, self.last_attn_weights = scaled_dot_product_attention(q, k, v, mask)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(merge_heads(out))


@mutant("MultiHeadAttention", "returns (out, weights) as a1's SelfAttention did, instead of one tensor",
        fails=("test_mha_shapes_and_errors",))
class mha_returns_a_pair(_MHA):
    def forward(self, query, key=None, value=None, mask=None):
        return _mha_forward(self, query, key, value, mask), self.last_attn_weights


# --- FeedForward ----------------------------------------------------------------------------


@mutant("FeedForward", "GELU instead of ReLU", fails=("test_feedforward",))
class ff_gelu(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.gelu(self.linear1(x))))


# --- TransformerBlock -------------------------------------------------------------------------


@mutant("TransformerBlock", "norm_first ignored: always pre-norm", fails=("test_block_post_norm",))
class block_norm_first_ignored(_Block):
    def forward(self, x, mask=None):
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.ff(self.norm2(x))


@mutant("TransformerBlock", "pre-norm attention sublayer without its residual connection",
        fails=("test_block_pre_norm", "test_lm_values_and_causality"))
class block_missing_residual(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.attn(self.norm1(x), mask=mask)
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.attn(x, mask=mask))
        return self.norm2(x + self.ff(x))


@mutant("TransformerBlock", "post-norm written as LN(x) + sublayer(LN(x)): residual from the normalised input",
        fails=("test_block_post_norm",))
class block_post_norm_residual_from_normed(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask=mask)
            return x + self.ff(self.norm2(x))
        h = self.norm1(x)
        x = h + self.attn(h, mask=mask)
        h = self.norm2(x)
        return h + self.ff(h)


@mutant("TransformerBlock", "norm1 used for both sublayers (norm2 created but unused)",
        fails=("test_block_pre_norm",))
class block_norm1_twice(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x), mask=mask)
            return x + self.ff(self.norm1(x))
        x = self.norm1(x + self.attn(x, mask=mask))
        return self.norm1(x + self.ff(x))


@mutant("TransformerBlock", "mask accepted but not passed on to attention",
        fails=("test_block_pre_norm", "test_lm_values_and_causality"))
class block_mask_dropped(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.attn(self.norm1(x))
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.attn(x))
        return self.norm2(x + self.ff(x))


@mutant("TransformerBlock", "unpacks attention's output as a1's (out, weights) pair: with a batch of two, sequence 0 "
        "is added to every sequence", fails=("test_block_pre_norm", "test_block_post_norm"))
class block_unpacks_attention(_Block):
    def forward(self, x, mask=None):
        if self.norm_first:
            attended, _ = self.attn(self.norm1(x), mask=mask)
            x = x + attended
            return x + self.ff(self.norm2(x))
        attended, _ = self.attn(x, mask=mask)
        x = self.norm1(x + attended)
        return self.norm2(x + self.ff(x))


# --- DecoderOnlyLM ---------------------------------------------------------------------------


@mutant("DecoderOnlyLM", "no causal mask: every position sees the whole sequence (future leakage)",
        fails=("test_lm_values_and_causality", "test_lm_training"))
class lm_not_causal(_LM):
    def forward(self, ids):
        x = _embed(self, ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm_f(x))


@mutant("DecoderOnlyLM", "positions counted from 1 (and L == max_len rejected)",
        fails=("test_lm_structure_and_errors", "test_lm_values_and_causality"))
class lm_positions_from_one(_LM):
    def forward(self, ids):
        length = ids.shape[1]
        if length >= self.max_len:
            raise ValueError("sequence too long")
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(1, length + 1, device=ids.device))
        return self.lm_head(self.norm_f(_causal_blocks(self, x)))


@mutant("DecoderOnlyLM", "no length check: L > max_len ends in an IndexError inside the embedding",
        fails=("test_lm_structure_and_errors",))
class lm_no_length_check(_LM):
    def forward(self, ids):
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))
        return self.lm_head(self.norm_f(_causal_blocks(self, x)))


@mutant("DecoderOnlyLM", "final layer norm norm_f created but not applied",
        fails=("test_lm_values_and_causality", "test_lm_training"))
class lm_missing_final_norm(_LM):
    def forward(self, ids):
        return self.lm_head(_causal_blocks(self, _embed(self, ids)))


@mutant("DecoderOnlyLM", "blocks built with TransformerBlock's norm_first=False (post-norm)",
        fails=("test_lm_values_and_causality",))
class lm_post_norm_blocks(_LM):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__(vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout, norm_first=False)

    forward = _lm_forward


@mutant("DecoderOnlyLM", "lm_head weight tied to tok_emb (the spec asks for an untied head)",
        fails=("test_lm_structure_and_errors",))
class lm_tied_head(_LM):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__(vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout)
        self.lm_head.weight = self.tok_emb.weight

    forward = _lm_forward


@mutant("DecoderOnlyLM", "no position embeddings added: the model cannot tell where a token is",
        fails=("test_lm_values_and_causality", "test_lm_training"))
class lm_no_positions(_LM):
    def forward(self, ids):
        if ids.shape[1] > self.max_len:
            raise ValueError("sequence too long")
        x = self.tok_emb(ids) + 0 * self.pos_emb.weight.sum()
        return self.lm_head(self.norm_f(_causal_blocks(self, x)))


# --- lm_loss ---------------------------------------------------------------------------------


@mutant("lm_loss", "labels not shifted: logits at t scored against token t", fails=("test_lm_loss",))
def loss_not_shifted(logits, ids, ignore_index=None):
    vocab_size = logits.shape[-1]
    predictions = logits.reshape(-1, vocab_size)             # every position
    targets = ids.reshape(-1)                                # every token
    return F.cross_entropy(predictions, targets, ignore_index=-100 if ignore_index is None else ignore_index)


@mutant("lm_loss", "shifted the wrong way: logits[:, 1:] against ids[:, :-1]", fails=("test_lm_loss",))
def loss_shifted_wrong_way(logits, ids, ignore_index=None):
    return F.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]), ids[:, :-1].reshape(-1),
                           ignore_index=-100 if ignore_index is None else ignore_index)


@mutant("lm_loss", "ignore_index ignored: pad targets are scored too", fails=("test_lm_loss",))
def loss_ignore_index_ignored(logits, ids, ignore_index=None):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


@mutant("lm_loss", "ignored targets dropped from the sum but still counted in the mean", fails=("test_lm_loss",))
def loss_mean_over_all_positions(logits, ids, ignore_index=None):
    targets = ids[:, 1:].reshape(-1)
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets,
                             ignore_index=-100 if ignore_index is None else ignore_index, reduction="none")
    return losses.sum() / targets.numel()


@mutant("lm_loss", "padding mask taken from the inputs ids[:, :-1] instead of the targets", fails=("test_lm_loss",))
def loss_ignore_on_inputs(logits, ids, ignore_index=None):
    targets = ids[:, 1:].reshape(-1)
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), targets, reduction="none")
    if ignore_index is None:
        return losses.mean()
    keep = (ids[:, :-1] != ignore_index).reshape(-1)
    return (losses * keep).sum() / keep.sum()


@mutant("lm_loss", "sum instead of mean over the targets", fails=("test_lm_loss",))
def loss_sum_not_mean(logits, ids, ignore_index=None):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                           ignore_index=-100 if ignore_index is None else ignore_index, reduction="sum")
