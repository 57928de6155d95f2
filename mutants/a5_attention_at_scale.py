"""Mutation catalogue for a5_attention_at_scale: realistic wrong implementations, one bug each.
`python -m grader check a5_attention_at_scale` proves every one of them loses points."""
import math

import torch
import torch.nn.functional as F

from grader.mutants import mutant


def _flash_tiles(q, k, v, causal, block_size, rescale_acc=True, rescale_sum=True, shift=None, key_stop=None):
    """The reference's tiled loop with switches for the bugs of the online softmax below."""
    len_q, len_k = q.shape[-2], k.shape[-2]
    shift = len_k - len_q if shift is None else shift
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        q_tile = q[..., q0:q1, :] * scale
        row_max = q.new_full((*q.shape[:-2], q1 - q0, 1), float("-inf"))
        row_sum = q.new_zeros((*q.shape[:-2], q1 - q0, 1))
        acc = q.new_zeros((*q.shape[:-2], q1 - q0, v.shape[-1]))
        rows = torch.arange(q0, q1, device=q.device)[:, None] + shift
        key_end = len_k if key_stop is None else key_stop
        for k0 in range(0, key_end, block_size):
            k1 = min(k0 + block_size, len_k)
            scores = q_tile @ k[..., k0:k1, :].transpose(-2, -1)
            if causal:
                cols = torch.arange(k0, k1, device=q.device)
                scores = scores.masked_fill(cols > rows, float("-inf"))
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            safe_max = new_max.masked_fill(new_max == float("-inf"), 0.0)
            p = torch.exp(scores - safe_max)
            correction = torch.exp(row_max - safe_max)
            row_sum = (correction * row_sum if rescale_sum else row_sum) + p.sum(dim=-1, keepdim=True)
            acc = (correction * acc if rescale_acc else acc) + p @ v[..., k0:k1, :]
            row_max = new_max
        out[..., q0:q1, :] = acc / row_sum.masked_fill(row_sum == 0, 1.0)
    return out


# --- flash_attention ---------------------------------------------------------------------


@mutant("flash_attention", "rescales the accumulator with the new max only: earlier tiles keep their old scale",
        fails=("test_flash_attention", "test_flash_attention_causal", "test_flash_attention_memory"))
def accumulator_not_rescaled(q, k, v, causal=False, block_size=64):
    return _flash_tiles(q, k, v, causal, block_size, rescale_acc=False)


@mutant("flash_attention", "forgets to rescale the running normaliser when the max grows",
        fails=("test_flash_attention", "test_flash_attention_causal", "test_flash_attention_memory",
               "test_float64_precision"))
def normaliser_not_rescaled(q, k, v, causal=False, block_size=64):
    return _flash_tiles(q, k, v, causal, block_size, rescale_sum=False)


@mutant("flash_attention", "causal mask aligned top-left (key j <= query i) instead of bottom-right",
        fails=("test_flash_attention_causal", "test_flash_attention_memory"))
def causal_top_left(q, k, v, causal=False, block_size=64):
    return _flash_tiles(q, k, v, causal, block_size, shift=0)


@mutant("flash_attention", "drops the last, shorter key block when block_size does not divide Lk",
        fails=("test_flash_attention", "test_flash_attention_causal", "test_flash_attention_memory"))
def last_partial_key_block_dropped(q, k, v, causal=False, block_size=64):
    return _flash_tiles(q, k, v, causal, block_size, key_stop=max(block_size, k.shape[-2] - k.shape[-2] % block_size))


@mutant("flash_attention", "drops the last, shorter query block (its rows are left uninitialised)",
        fails=("test_flash_attention", "test_flash_attention_causal", "test_flash_attention_memory"))
def last_partial_query_block_dropped(q, k, v, causal=False, block_size=64):
    full = q.shape[-2] - q.shape[-2] % block_size
    if full == 0:
        return _flash_tiles(q, k, v, causal, block_size)
    out = q.new_zeros(*q.shape[:-1], v.shape[-1])
    shift = k.shape[-2] - q.shape[-2]
    out[..., :full, :] = _flash_tiles(q[..., :full, :], k, v, causal, block_size, shift=shift)
    return out


@mutant("flash_attention", "causal: stops one tile early and never reads the diagonal tile",
        fails=("test_flash_attention_causal", "test_flash_attention_memory"))
def diagonal_tile_skipped(q, k, v, causal=False, block_size=64):
    if not causal:
        return _flash_tiles(q, k, v, causal, block_size)
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    shift = k.shape[-2] - q.shape[-2]
    for q0 in range(0, q.shape[-2], block_size):
        q1 = min(q0 + block_size, q.shape[-2])
        stop = max(0, q0 + shift)                      # only the tiles strictly before the diagonal
        keys = k[..., :max(stop, 1), :]
        values = v[..., :max(stop, 1), :]
        out[..., q0:q1, :] = _flash_tiles(q[..., q0:q1, :], keys, values, True, block_size,
                                          shift=q0 + shift, key_stop=max(stop, 1))
    return out


@mutant("flash_attention", "rows that see no key divide 0 by 0: NaN instead of a zero output",
        fails=("test_flash_attention_causal",))
def empty_rows_nan(q, k, v, causal=False, block_size=64):
    out = _flash_tiles(q, k, v, causal, block_size)
    if causal and q.shape[-2] > k.shape[-2]:
        out[..., :q.shape[-2] - k.shape[-2], :] = float("nan")
    return out


@mutant("flash_attention", "dense in disguise: builds the whole (Lq, Lk) score matrix, then a softmax",
        fails=("test_flash_attention_memory",))
def flash_dense_scores(q, k, v, causal=False, block_size=64):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        len_q, len_k = q.shape[-2], k.shape[-2]
        keep = torch.ones(len_q, len_k, dtype=torch.bool, device=q.device).tril(diagonal=len_k - len_q)
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


@mutant("flash_attention", "tiles only the queries: each query block scores all keys at once, plain softmax",
        fails=("test_flash_attention_memory",))
def query_strips_only(q, k, v, causal=False, block_size=64):
    len_q, len_k = q.shape[-2], k.shape[-2]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        scores = q[..., q0:q1, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # (block, Lk)
        if causal:
            rows = torch.arange(q0, q1, device=q.device)[:, None] + len_k - len_q
            scores = scores.masked_fill(torch.arange(len_k, device=q.device) > rows, float("-inf"))
        out[..., q0:q1, :] = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v
    return out


@mutant("flash_attention", "a dense (Lq, Lk) causal mask built once, sliced per tile",
        fails=("test_flash_attention_memory",))
def dense_causal_mask(q, k, v, causal=False, block_size=64):
    len_q, len_k = q.shape[-2], k.shape[-2]
    keep = torch.ones(len_q, len_k, dtype=torch.bool, device=q.device).tril(diagonal=len_k - len_q)
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        m = q.new_full((*q.shape[:-2], q1 - q0, 1), float("-inf"))
        s_ = q.new_zeros((*q.shape[:-2], q1 - q0, 1))
        acc = q.new_zeros((*q.shape[:-2], q1 - q0, v.shape[-1]))
        for k0 in range(0, len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            scores = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) * scale
            if causal:
                scores = scores.masked_fill(~keep[q0:q1, k0:k1], float("-inf"))
            new_m = torch.maximum(m, scores.amax(-1, keepdim=True))
            safe = new_m.masked_fill(new_m == float("-inf"), 0.0)
            p = torch.exp(scores - safe)
            c = torch.exp(m - safe)
            s_ = c * s_ + p.sum(-1, keepdim=True)
            acc = c * acc + p @ v[..., k0:k1, :]
            m = new_m
        out[..., q0:q1, :] = acc / s_.masked_fill(s_ == 0, 1.0)
    return out


@mutant("flash_attention", "casts to float32: float64 inputs lose their dtype",
        fails=("test_float64_precision",))
def flash_forces_float32(q, k, v, causal=False, block_size=64):
    return _flash_tiles(q.float(), k.float(), v.float(), causal, block_size)


@mutant("flash_attention", "calls torch's built-in attention (forbidden)",
        fails=("test_flash_attention_memory", "test_no_builtin_attention"))
def flash_uses_builtin(q, k, v, causal=False, block_size=64):
    if causal:
        len_q, len_k = q.shape[-2], k.shape[-2]
        keep = torch.ones(len_q, len_k, dtype=torch.bool, device=q.device).tril(diagonal=len_k - len_q)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep).nan_to_num(0.0)
    return F.scaled_dot_product_attention(q, k, v)


# --- sliding_window_mask -----------------------------------------------------------------


@mutant("sliding_window_mask", "window off by one: i - j <= window keeps window + 1 keys",
        fails=("test_sliding_window_mask",))
def window_off_by_one(seq_len, window, n_global=0, device=None):
    if window < 1 or n_global < 0:
        raise ValueError("bad window or n_global")
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    return (j <= i) & ((i - j <= window) | (j < n_global))


@mutant("sliding_window_mask", "global tokens see the future: j < n_global is allowed even after the query",
        fails=("test_sliding_window_mask",))
def global_sees_future(seq_len, window, n_global=0, device=None):
    if window < 1 or n_global < 0:
        raise ValueError("bad window or n_global")
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    return ((j <= i) & (i - j < window)) | (j < n_global)


@mutant("sliding_window_mask", "accepts window=0 (and negative windows) instead of raising ValueError",
        fails=("test_sliding_window_mask",))
def mask_no_value_error(seq_len, window, n_global=0, device=None):
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    return (j <= i) & ((i - j < window) | (j < n_global))


# --- sliding_window_attention --------------------------------------------------------------


def _chunked_window(q, k, v, window, n_global, globals_seen=True, first_key=None):
    length = q.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for s in range(0, length, window):
        e = min(s + window, length)
        first = max(0, s - window + 1) if first_key is None else first_key(s)
        n_before = min(n_global, first) if globals_seen else 0
        keys = torch.cat([k[..., :n_before, :], k[..., first:e, :]], dim=-2)
        values = torch.cat([v[..., :n_before, :], v[..., first:e, :]], dim=-2)
        i = torch.arange(s, e, device=q.device)[:, None]
        j = torch.cat([torch.arange(n_before, device=q.device), torch.arange(first, e, device=q.device)])[None, :]
        keep = (j <= i) & ((i - j < window) | ((j < n_global) if globals_seen else False))
        scores = (q[..., s:e, :] @ keys.transpose(-2, -1)) * scale
        out[..., s:e, :] = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ values
    return out


@mutant("sliding_window_attention", "global tokens never seen: n_global is ignored",
        fails=("test_sliding_window_attention", "test_sliding_window_memory"))
def globals_not_seen(q, k, v, window, n_global=0):
    return _chunked_window(q, k, v, window, n_global, globals_seen=False)


@mutant("sliding_window_attention", "each chunk reads only its own keys: the start of every window is cut off",
        fails=("test_sliding_window_attention", "test_sliding_window_memory"))
def chunk_keys_only(q, k, v, window, n_global=0):
    return _chunked_window(q, k, v, window, n_global, first_key=lambda s: s)


@mutant("sliding_window_attention", "dense: the whole (L, L) masked score matrix, then a softmax",
        fails=("test_sliding_window_memory",))
def sliding_dense(q, k, v, window, n_global=0):
    length = q.shape[-2]
    i = torch.arange(length, device=q.device)[:, None]
    j = torch.arange(length, device=q.device)[None, :]
    keep = (j <= i) & ((i - j < window) | (j < n_global))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


# --- elu_feature_map, linear_attention, linear_attention_step ------------------------------


@mutant("elu_feature_map", "forgets the + 1: elu(x) is negative for x < 0",
        fails=("test_elu_feature_map", "test_linear_attention", "test_linear_attention_step"))
def elu_without_one(x):
    return F.elu(x)


@mutant("linear_attention", "applies the feature map to the values too", fails=("test_linear_attention",))
def phi_on_values(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k, v = elu_feature_map(q), elu_feature_map(k), elu_feature_map(v)
    if not causal:
        return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ phi_k.sum(-2)[..., None] + eps)
    lower = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).tril()
    similarity = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~lower, 0.0)
    return (similarity @ v) / (similarity.sum(-1, keepdim=True) + eps)


@mutant("linear_attention", "causal numerator, but the normaliser sums over all positions",
        fails=("test_linear_attention",))
def normaliser_over_all_positions(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    denominator = phi_q @ phi_k.sum(-2)[..., None] + eps
    if not causal:
        return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / denominator
    lower = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).tril()
    similarity = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~lower, 0.0)
    return (similarity @ v) / denominator


@mutant("linear_attention", "eps added to z before the dot product: phi(q) . (z + eps)",
        fails=("test_linear_attention",))
def eps_inside_normaliser(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    if not causal:
        return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ (phi_k.sum(-2)[..., None] + eps))
    z = phi_k.cumsum(dim=-2) + eps                                        # z_i + eps, every component
    lower = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).tril()
    similarity = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~lower, 0.0)
    return (similarity @ v) / (phi_q * z).sum(-1, keepdim=True)


@mutant("linear_attention", "causal=False ignored: always the causal sums", fails=("test_linear_attention",))
def always_causal(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    lower = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).tril()
    similarity = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(~lower, 0.0)
    return (similarity @ v) / (similarity.sum(-1, keepdim=True) + eps)


@mutant("linear_attention_step", "state not carried: every step starts again from zeros",
        fails=("test_linear_attention_step", "test_float64_precision"))
def state_not_carried(q_t, k_t, v_t, state=None):
    phi_q, phi_k = elu_feature_map(q_t), elu_feature_map(k_t)
    S = phi_k[..., :, None] * v_t[..., None, :]
    z = phi_k
    return (phi_q[..., None, :] @ S)[..., 0, :] / ((phi_q * z).sum(-1, keepdim=True) + 1e-6), (S, z)


@mutant("linear_attention_step", "reads the state before adding the new position: query t misses key t",
        fails=("test_linear_attention_step",))
def reads_before_update(q_t, k_t, v_t, state=None):
    phi_q, phi_k = elu_feature_map(q_t), elu_feature_map(k_t)
    if state is None:
        S, z = q_t.new_zeros(*k_t.shape, v_t.shape[-1]), q_t.new_zeros(k_t.shape)
    else:
        S, z = state
    out = (phi_q[..., None, :] @ S)[..., 0, :] / ((phi_q * z).sum(-1, keepdim=True) + 1e-6)
    return out, (S + phi_k[..., :, None] * v_t[..., None, :], z + phi_k)


@mutant("linear_attention_step", "keeps every past key and value (a KV cache) instead of a fixed-size state",
        fails=("test_linear_attention_step",))
def state_is_a_cache(q_t, k_t, v_t, state=None):
    keys = k_t[..., None, :] if state is None else torch.cat([state[0], k_t[..., None, :]], dim=-2)
    values = v_t[..., None, :] if state is None else torch.cat([state[1], v_t[..., None, :]], dim=-2)
    weights = (elu_feature_map(q_t)[..., None, :] * elu_feature_map(keys)).sum(-1)
    out = (weights[..., None] * values).sum(-2) / (weights.sum(-1, keepdim=True) + 1e-6)
    return out, (keys, values)


@mutant("linear_attention_step", "a state created with torch.zeros and no dtype: float64 becomes float32",
        fails=("test_float64_precision",))
def step_state_float32(q_t, k_t, v_t, state=None):
    phi_q, phi_k = elu_feature_map(q_t), elu_feature_map(k_t)
    if state is None:
        S = torch.zeros(*k_t.shape, v_t.shape[-1], device=q_t.device)
        z = torch.zeros(k_t.shape, device=q_t.device)
    else:
        S, z = state
    S = S + phi_k[..., :, None].to(S.dtype) * v_t[..., None, :].to(S.dtype)
    z = z + phi_k.to(z.dtype)
    out = (phi_q.to(S.dtype)[..., None, :] @ S)[..., 0, :] / ((phi_q.to(z.dtype) * z).sum(-1, keepdim=True) + 1e-6)
    return out, (S, z)


@mutant("linear_attention_step", "updates the caller's state in place (S += ...)",
        fails=("test_linear_attention_step",))
def state_updated_in_place(q_t, k_t, v_t, state=None):
    phi_q, phi_k = elu_feature_map(q_t), elu_feature_map(k_t)
    if state is None:
        S, z = q_t.new_zeros(*k_t.shape, v_t.shape[-1]), q_t.new_zeros(k_t.shape)
    else:
        S, z = state
    S += phi_k[..., :, None] * v_t[..., None, :]
    z += phi_k
    return (phi_q[..., None, :] @ S)[..., 0, :] / ((phi_q * z).sum(-1, keepdim=True) + 1e-6), (S, z)


# --- repeat_kv, grouped_query_attention ----------------------------------------------------


@mutant("repeat_kv", "x.repeat(1, n_rep, 1, 1): heads interleaved 0, 1, 0, 1 instead of 0, 0, 1, 1",
        fails=("test_repeat_kv",))
def repeat_tiles_heads(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)


def _gqa_repeated(q, k, v, mask, n_rep_heads):
    k, v = n_rep_heads(k), n_rep_heads(v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v


@mutant("grouped_query_attention", "query head h reads key/value head h % H_kv instead of h // n_rep",
        fails=("test_grouped_query_attention", "test_gqa_memory"))
def gqa_heads_modulo(q, k, v, mask=None):
    if q.shape[1] % k.shape[1]:
        raise ValueError("H is not a multiple of H_kv")
    n_rep = q.shape[1] // k.shape[1]
    return _gqa_repeated(q, k, v, mask, lambda x: x.repeat(1, n_rep, 1, 1))


@mutant("grouped_query_attention", "no ValueError when H is not a multiple of H_kv (heads silently dropped)",
        fails=("test_grouped_query_attention", "test_gqa_memory"))
def gqa_no_value_error(q, k, v, mask=None):
    n_rep = max(1, q.shape[1] // k.shape[1])
    out = _gqa_repeated(q[:, :n_rep * k.shape[1]], k, v, None if mask is None else torch.broadcast_to(
        mask, (q.shape[0], q.shape[1], q.shape[2], k.shape[2]))[:, :n_rep * k.shape[1]],
        lambda x: torch.repeat_interleave(x, n_rep, dim=1))
    return torch.cat([out, q.new_zeros(q.shape[0], q.shape[1] - out.shape[1], q.shape[2], v.shape[-1])], dim=1)


@mutant("grouped_query_attention", "materialises the repeated key/value heads (repeat_interleave), then MHA",
        fails=("test_gqa_memory",))
def gqa_materialises_repeats(q, k, v, mask=None):
    if q.shape[1] % k.shape[1]:
        raise ValueError("H is not a multiple of H_kv")
    n_rep = q.shape[1] // k.shape[1]
    return _gqa_repeated(q, k, v, mask, lambda x: torch.repeat_interleave(x, n_rep, dim=1))


@mutant("grouped_query_attention", "a query whose keys are all blocked gets NaN: softmax over a row of -inf, "
                                   "no zeroing", fails=("test_grouped_query_attention",))
def gqa_blocked_rows_nan(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError("H is not a multiple of H_kv")
    n_rep = heads // kv_heads
    scores = q.reshape(batch, kv_heads, n_rep * len_q, d) @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        keep = torch.broadcast_to(mask, (batch, heads, len_q, len_k)).reshape(batch, kv_heads, n_rep * len_q, len_k)
        scores = scores.masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).reshape(batch, heads, len_q, v.shape[-1])


@mutant("grouped_query_attention", "a per-head (B, H, Lq, Lk) mask applied per key/value head (first of each group)",
        fails=("test_grouped_query_attention",))
def gqa_mask_per_kv_head(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError("H is not a multiple of H_kv")
    n_rep = heads // kv_heads
    scores = torch.einsum("bgrqd,bgkd->bgrqk", q.reshape(batch, kv_heads, n_rep, len_q, d), k) / math.sqrt(d)
    if mask is not None:
        full = torch.broadcast_to(mask, (batch, heads, len_q, len_k))[:, ::n_rep]       # (B, H_kv, Lq, Lk)
        scores = scores.masked_fill(~full[:, :, None], float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("bgrqk,bgkd->bgrqd", weights, v).reshape(batch, heads, len_q, v.shape[-1])


# --- precision: float64 computed or returned in float32 (test_float64_precision alone) -------------


@mutant("flash_attention", "the running max, sum and accumulator created with torch.full / torch.zeros and no "
                           "dtype: float64 inputs are accumulated in float32", fails=("test_float64_precision",))
def flash_float32_accumulators(q, k, v, causal=False, block_size=64):
    len_q, len_k = q.shape[-2], k.shape[-2]
    shift, scale = len_k - len_q, 1.0 / math.sqrt(q.shape[-1])
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        q_tile = q[..., q0:q1, :] * scale
        row_max = torch.full((*q.shape[:-2], q1 - q0, 1), float("-inf"), device=q.device)
        row_sum = torch.zeros((*q.shape[:-2], q1 - q0, 1), device=q.device)
        acc = torch.zeros((*q.shape[:-2], q1 - q0, v.shape[-1]), device=q.device)
        rows = torch.arange(q0, q1, device=q.device)[:, None] + shift
        for k0 in range(0, min(len_k, q1 + shift) if causal else len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            scores = (q_tile @ k[..., k0:k1, :].transpose(-2, -1)).float()
            if causal:
                scores = scores.masked_fill(torch.arange(k0, k1, device=q.device) > rows, float("-inf"))
            new_max = torch.maximum(row_max, scores.amax(dim=-1, keepdim=True))
            safe_max = new_max.masked_fill(new_max == float("-inf"), 0.0)
            p = torch.exp(scores - safe_max)
            correction = torch.exp(row_max - safe_max)
            row_sum = correction * row_sum + p.sum(dim=-1, keepdim=True)
            acc = correction * acc + p @ v[..., k0:k1, :].float()
            row_max = new_max
        out[..., q0:q1, :] = acc / row_sum.masked_fill(row_sum == 0, 1.0)
    return out


@mutant("sliding_window_attention", "the output buffer created with torch.empty and no dtype: float64 results are "
                                    "written into float32", fails=("test_float64_precision",))
def sliding_float32_output(q, k, v, window, n_global=0):
    out = torch.empty(*q.shape[:-1], v.shape[-1], device=q.device)
    out[...] = _chunked_window(q, k, v, window, n_global)
    return out


@mutant("elu_feature_map", "F.elu(x.float()) + 1: float64 inputs come back float32", fails=("test_float64_precision",))
def elu_in_float32(x):
    return F.elu(x.float()) + 1


@mutant("linear_attention", "the features computed in float32 (elu(x.float()) + 1) and cast back: e^x below 3e-8 "
                            "rounds to 0", fails=("test_float64_precision",))
def linear_float32_features(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = (F.elu(q.float()) + 1).to(q.dtype), (F.elu(k.float()) + 1).to(k.dtype)
    if not causal:
        return (phi_q @ (phi_k.transpose(-2, -1) @ v)) / (phi_q @ phi_k.sum(-2)[..., None] + eps)
    similarity = torch.tril(phi_q @ phi_k.transpose(-2, -1))
    return (similarity @ v) / (similarity.sum(-1, keepdim=True) + eps)


@mutant("grouped_query_attention", "softmax(..., dtype=torch.float32) without casting back: float64 inputs return "
                                   "float32", fails=("test_float64_precision",))
def gqa_float32_softmax(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError("H is not a multiple of H_kv")
    n_rep = heads // kv_heads
    scores = q.reshape(batch, kv_heads, n_rep * len_q, d) @ k.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        keep = torch.broadcast_to(mask, (batch, heads, len_q, len_k)).reshape(batch, kv_heads, n_rep * len_q, len_k)
        scores = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).nan_to_num(0.0)
    return (weights @ v.float()).reshape(batch, heads, len_q, v.shape[-1])
