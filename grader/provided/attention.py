# Reference scaled dot-product attention from assignment 1 (provided, read-only).
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    """q: (..., Lq, dk), k: (..., Lk, dk), v: (..., Lk, dv), mask: bool, True = may attend,
    broadcastable to (..., Lq, Lk). Returns (output (..., Lq, dv), weights (..., Lq, Lk))."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)            # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # a row with every key blocked is softmax(-inf, ..., -inf) = NaN: give it zero weight
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights
