# The tiles of assignment 5 in PyTorch (provided, read-only): lecture 10's non-causal tiled loop, the online
# softmax one (block_size x block_size) tile of scores at a time; the baseline a fused kernel is timed against.
import math

import torch


def pytorch_tiles_attention(q, k, v, block_size=64):
    """Exact softmax attention of q (..., Lq, d), k and v (..., Lk, d), one tile at a time, as PyTorch operations
    launched from a Python loop (differentiable: autograd records every tile)."""
    len_q, len_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    rows = []
    for q0 in range(0, len_q, block_size):
        q_tile = q[..., q0:q0 + block_size, :] * scale                      # (..., Bq, d)
        row_max = q_tile.new_full(q_tile.shape[:-1] + (1,), float("-inf"))  # m
        row_sum = q_tile.new_zeros(q_tile.shape[:-1] + (1,))                # l
        acc = q_tile.new_zeros(q_tile.shape[:-1] + v.shape[-1:])            # unnormalised output
        for k0 in range(0, len_k, block_size):
            scores = q_tile @ k[..., k0:k0 + block_size, :].transpose(-2, -1)
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            p, correction = torch.exp(scores - new_max), torch.exp(row_max - new_max)
            row_sum = correction * row_sum + p.sum(dim=-1, keepdim=True)
            acc = correction * acc + p @ v[..., k0:k0 + block_size, :]
            row_max = new_max
        rows.append(acc / row_sum)
    return torch.cat(rows, dim=-2)
