# The decoder-only transformer of assignment 2 (provided, read-only). Attention is written
# with explicit matmuls (scaled_dot_product_attention above), so FlopCounterMode counts it.
import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(x, n_heads):
    """(B, L, D) -> (B, H, L, D/H)."""
    batch, length, d_model = x.shape
    return x.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(x):
    """(B, H, L, D/H) -> (B, L, D)."""
    batch, n_heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * d_head)


def causal_mask(seq_len, device=None):
    """(L, L) boolean, True where key position <= query position."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.o_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attn_weights = None

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        q = split_heads(self.q_proj(query), self.n_heads)        # (B, H, Lq, Dh)
        k = split_heads(self.k_proj(key), self.n_heads)          # (B, H, Lk, Dh)
        v = split_heads(self.v_proj(value), self.n_heads)        # (B, H, Lk, Dh)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        self.last_attn_weights = weights                         # (B, H, Lq, Lk)
        return self.o_proj(merge_heads(out))


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=True):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.norm_first:   # pre-LN: x + sublayer(LN(x))
            x = x + self.dropout(self.attn(self.norm1(x), mask=mask))
            return x + self.dropout(self.ff(self.norm2(x)))
        x = self.norm1(x + self.dropout(self.attn(x, mask=mask)))   # post-LN: LN(x + sublayer(x))
        return self.norm2(x + self.dropout(self.ff(x)))


class DecoderOnlyLM(nn.Module):
    def __init__(self, vocab_size, d_model, n_heads, n_layers, d_ff, max_len, dropout=0.0):
        super().__init__()
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            [TransformerBlock(d_model, n_heads, d_ff, dropout=dropout, norm_first=True) for _ in range(n_layers)])
        self.norm_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids):
        """ids: (B, L) token ids -> logits (B, L, vocab_size); always causal."""
        length = ids.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
        positions = torch.arange(length, device=ids.device)
        x = self.tok_emb(ids) + self.pos_emb(positions)           # (B, L, D)
        mask = causal_mask(length, device=ids.device)
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.norm_f(x))
