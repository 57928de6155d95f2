# Reference scaled dot-product attention from assignment 1 (provided, read-only).
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    """q: (..., Lq, dk), k: (..., Lk, dk), v: (..., Lk, dv), mask: bool, True = may attend,
    broadcastable to (..., Lq, Lk). Returns (output (..., Lq, dv), weights (..., Lq, Lk))."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)            # (..., Lq, Lk)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        scores = scores.masked_fill(~mask, float("-inf"))
        # a row with every key blocked would be softmax(-inf, ..., -inf) = 0/0 = NaN, and one NaN poisons
        # every gradient (lecture 5): such rows get finite scores before the softmax, zero weights after it
        has_key = mask.any(dim=-1, keepdim=True)                 # (..., Lq, 1)
        weights = torch.softmax(scores.masked_fill(~has_key, 0.0), dim=-1).masked_fill(~has_key, 0.0)
    return weights @ v, weights
