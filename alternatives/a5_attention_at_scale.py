"""Correct alternatives for a5_attention_at_scale: each computes what the task asks, written differently from
the reference solution, and must keep every point (`python -m grader check a5_attention_at_scale`). Those in
the float32-inside styles of widely used code (FlashAttention's float32 statistics, Longformer's "fp32 for
numerical stability" softmax, flash-linear-attention's float32 state, Hugging Face's float32 softmax) declare
`loses=("test_float64_precision",)`: they must lose that cell, the task's float64 contract, and no other."""
import math

import torch
import torch.nn.functional as F

from grader.mutants import alternative

# --- flash_attention -----------------------------------------------------------------------


@alternative("flash_attention", "einsum tiles and a base-2 online softmax (exp2 of scores scaled by log2 e)")
def flash_einsum_exp2(q, k, v, causal=False, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    len_q, len_k = q.shape[-2], k.shape[-2]
    scale2 = math.log2(math.e) / math.sqrt(q.shape[-1])
    pieces = []
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        m2 = torch.full((*q.shape[:-2], q1 - q0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        total = torch.zeros((*q.shape[:-2], q1 - q0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((*q.shape[:-2], q1 - q0, v.shape[-1]), dtype=q.dtype, device=q.device)
        for k0 in range(0, len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            if causal and k0 > q1 - 1 + len_k - len_q:
                break
            s2 = torch.einsum("...qd,...kd->...qk", q[..., q0:q1, :], k[..., k0:k1, :]) * scale2
            if causal:
                visible = (torch.arange(k0, k1, device=q.device)[None, :]
                           <= torch.arange(q0, q1, device=q.device)[:, None] + (len_k - len_q))
                s2 = torch.where(visible, s2, torch.full_like(s2, float("-inf")))
            m2_new = torch.maximum(m2, s2.max(dim=-1, keepdim=True).values)
            base = torch.where(torch.isinf(m2_new), torch.zeros_like(m2_new), m2_new)
            p = torch.exp2(s2 - base)
            shrink = torch.exp2(m2 - base)
            total = total * shrink + p.sum(-1, keepdim=True)
            acc = acc * shrink + torch.einsum("...qk,...kd->...qd", p, v[..., k0:k1, :])
            m2 = m2_new
        pieces.append(torch.where(total > 0, acc / torch.where(total > 0, total, torch.ones_like(total)),
                                  torch.zeros_like(acc)))
    return torch.cat(pieces, dim=-2)


@alternative("flash_attention", "key blocks outer, query blocks inner (FlashAttention-1's loop order): the running "
                                "max, sum and output of every query row live in (Lq, 1) and (Lq, dv) tensors")
def flash_key_blocks_outer(q, k, v, causal=False, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    len_q, len_k = q.shape[-2], k.shape[-2]
    shift = len_k - len_q
    scale = q.shape[-1] ** -0.5
    row_max = q.new_full((*q.shape[:-1], 1), float("-inf"))
    row_sum = q.new_zeros((*q.shape[:-1], 1))
    acc = q.new_zeros((*q.shape[:-1], v.shape[-1]))
    for k0 in range(0, len_k, block_size):
        k1 = min(k0 + block_size, len_k)
        k_tile, v_tile = k[..., k0:k1, :], v[..., k0:k1, :]
        first_row = max(0, k0 - shift) if causal else 0          # rows before this see none of these keys
        for q0 in range(first_row - first_row % block_size, len_q, block_size):
            q1 = min(q0 + block_size, len_q)
            scores = (q[..., q0:q1, :] @ k_tile.transpose(-2, -1)) * scale
            if causal:
                blocked = torch.arange(k0, k1, device=q.device) > torch.arange(q0, q1, device=q.device)[:, None] + shift
                scores = scores.masked_fill(blocked, float("-inf"))
            old = row_max[..., q0:q1, :]
            new = torch.maximum(old, scores.amax(-1, keepdim=True))
            safe = torch.where(new == float("-inf"), torch.zeros_like(new), new)
            p = (scores - safe).exp()
            c = (old - safe).exp()
            row_sum[..., q0:q1, :] = c * row_sum[..., q0:q1, :] + p.sum(-1, keepdim=True)
            acc[..., q0:q1, :] = c * acc[..., q0:q1, :] + p @ v_tile
            row_max[..., q0:q1, :] = new
    return acc / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)


@alternative("flash_attention", "each tile's own softmax and log-sum-exp, merged by log-sum-exp weights "
                                "(the split-K / ring-attention combination), float64 inside")
def flash_logsumexp_merge(q, k, v, causal=False, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    len_q, len_k = q.shape[-2], k.shape[-2]
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64, device=q.device)
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        lse = torch.full((*q.shape[:-2], q1 - q0, 1), float("-inf"), dtype=torch.float64, device=q.device)
        merged = torch.zeros(*q.shape[:-2], q1 - q0, v.shape[-1], dtype=torch.float64, device=q.device)
        for k0 in range(0, len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            scores = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            if causal:
                rows = torch.arange(q0, q1, device=q.device)[:, None] + len_k - len_q
                scores = scores.masked_fill(torch.arange(k0, k1, device=q.device) > rows, float("-inf"))
            tile_lse = torch.logsumexp(scores, dim=-1, keepdim=True)
            tile_out = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v[..., k0:k1, :]
            new_lse = torch.logaddexp(lse, tile_lse)
            seen = new_lse > float("-inf")
            w_old = torch.where(seen, torch.exp(lse - new_lse), torch.zeros_like(lse))
            w_new = torch.where(seen, torch.exp(tile_lse - new_lse), torch.zeros_like(lse))
            merged = w_old * merged + w_new * tile_out
            lse = new_lse
        out[..., q0:q1, :] = merged
    return out.to(dtype)


# --- sliding_window_mask -------------------------------------------------------------------


@alternative("sliding_window_mask", "a band of torch.tril minus torch.tril shifted by the window, "
                                    "or'ed with the first n_global columns")
def mask_from_tril(seq_len, window, n_global=0, device=None):
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if n_global < 0:
        raise ValueError(f"n_global must be >= 0, got {n_global}")
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)
    causal = ones.tril()
    band = causal & ~ones.tril(diagonal=-window)
    columns = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    columns[:, :n_global] = True
    return band | (causal & columns)


# --- sliding_window_attention --------------------------------------------------------------


@alternative("sliding_window_attention", "every query's window at once: keys padded by window - 1 and unfolded "
                                         "into (L, window) views, the global keys as a second score block")
def sliding_unfold(q, k, v, window, n_global=0):
    length, d = q.shape[-2], q.shape[-1]
    pad = window - 1
    k_pad = F.pad(k, (0, 0, pad, 0))
    v_pad = F.pad(v, (0, 0, pad, 0))
    k_win = k_pad.unfold(-2, window, 1).transpose(-2, -1)       # (..., L, window, d): key i - window + 1 + w
    v_win = v_pad.unfold(-2, window, 1).transpose(-2, -1)
    i = torch.arange(length, device=q.device)[:, None]
    j_win = i - window + 1 + torch.arange(window, device=q.device)[None, :]
    local = torch.einsum("...ld,...lwd->...lw", q, k_win) / math.sqrt(d)
    local = local.masked_fill(j_win < 0, float("-inf"))
    n_g = min(n_global, length)
    j_glob = torch.arange(n_g, device=q.device)[None, :]
    glob = (q @ k[..., :n_g, :].transpose(-2, -1)) / math.sqrt(d)      # (..., L, n_g)
    glob = glob.masked_fill(~((j_glob <= i) & (j_glob < i - window + 1)), float("-inf"))   # not in the window
    weights = torch.softmax(torch.cat([glob, local], dim=-1), dim=-1)
    return (torch.einsum("...lg,...ge->...le", weights[..., :n_g], v[..., :n_g, :])
            + torch.einsum("...lw,...lwe->...le", weights[..., n_g:], v_win))


@alternative("sliding_window_attention", "fixed chunks of 16 queries whatever the window, keys gathered by index, "
                                         "an additive -inf bias instead of masked_fill")
def sliding_fixed_chunks(q, k, v, window, n_global=0):
    length = q.shape[-2]
    outputs = []
    for s in range(0, length, 16):
        e = min(s + 16, length)
        first = max(0, s - window + 1)
        index = torch.cat([torch.arange(min(n_global, first), device=q.device),
                           torch.arange(first, e, device=q.device)])
        keys, values = k.index_select(-2, index), v.index_select(-2, index)
        i = torch.arange(s, e, device=q.device)[:, None]
        allowed = (index[None, :] <= i) & ((i - index[None, :] < window) | (index[None, :] < n_global))
        bias = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device).masked_fill(~allowed, float("-inf"))
        scores = q[..., s:e, :] @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias
        outputs.append(torch.softmax(scores, dim=-1) @ values)
    return torch.cat(outputs, dim=-2)


# --- linear_attention, linear_attention_step ------------------------------------------------


@alternative("linear_attention", "causal sums as cumulative sums of the outer products phi(k_j) v_j^T")
def linear_cumsum(q, k, v, causal=True, eps=1e-6):
    phi_q = torch.where(q > 0, q + 1, torch.exp(torch.clamp(q, max=0)))
    phi_k = torch.where(k > 0, k + 1, torch.exp(torch.clamp(k, max=0)))
    outer = phi_k[..., :, :, None] * v[..., :, None, :]                  # (..., L, d, dv)
    if causal:
        S, z = outer.cumsum(dim=-3), phi_k.cumsum(dim=-2)
    else:
        S, z = outer.sum(dim=-3, keepdim=True), phi_k.sum(dim=-2, keepdim=True)
    numerator = torch.einsum("...ld,...lde->...le", phi_q, S.expand(*phi_q.shape, v.shape[-1]))
    return numerator / ((phi_q * z).sum(-1, keepdim=True) + eps)


@alternative("linear_attention", "the recurrent form: causal outputs from linear_attention_step one position at "
                                 "a time (eps passed through), the non-causal one from einsum sums")
def linear_by_recurrence(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    if not causal:
        S = torch.einsum("...jd,...je->...de", phi_k, v)
        z = phi_k.sum(-2)
        denominator = torch.einsum("...id,...d->...i", phi_q, z)[..., None] + eps
        return torch.einsum("...id,...de->...ie", phi_q, S) / denominator
    outputs, S, z = [], None, None
    for t in range(q.shape[-2]):
        update = torch.einsum("...d,...e->...de", phi_k[..., t, :], v[..., t, :])
        S = update if S is None else S + update
        z = phi_k[..., t, :] if z is None else z + phi_k[..., t, :]
        outputs.append(torch.einsum("...d,...de->...e", phi_q[..., t, :], S)
                       / (torch.einsum("...d,...d->...", phi_q[..., t, :], z)[..., None] + eps))
    return torch.stack(outputs, dim=-2)


@alternative("linear_attention_step", "no zeros at the start: the first state is the first outer product "
                                      "(einsum), every later one a new sum")
def step_einsum(q_t, k_t, v_t, state=None):
    phi_q, phi_k = F.elu(q_t) + 1, F.elu(k_t) + 1
    update = torch.einsum("...d,...e->...de", phi_k, v_t)
    S = update if state is None else state[0] + update
    z = phi_k if state is None else state[1] + phi_k
    out = torch.einsum("...d,...de->...e", phi_q, S) / (torch.einsum("...d,...d->...", phi_q, z)[..., None] + 1e-6)
    return out, (S, z)


# --- repeat_kv, grouped_query_attention --------------------------------------------------------


@alternative("repeat_kv", "index_select with the head index h // n_rep")
def repeat_kv_index_select(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


@alternative("grouped_query_attention", "a 5-D einsum over (B, H_kv, n_rep, Lq, d), an additive float mask, "
                                        "zero rows by torch.where")
def gqa_einsum_groups(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError(f"H={heads} is not a multiple of H_kv={kv_heads}")
    n_rep = heads // kv_heads
    grouped = q.view(batch, kv_heads, n_rep, len_q, d)
    scores = torch.einsum("bgrqd,bgkd->bgrqk", grouped, k) / math.sqrt(d)
    if mask is not None:
        keep = torch.broadcast_to(mask, (batch, heads, len_q, len_k)).view(batch, kv_heads, n_rep, len_q, len_k)
        scores = scores + torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.where(torch.isnan(weights), torch.zeros_like(weights), weights)
    return torch.einsum("bgrqk,bgke->bgrqe", weights, v).reshape(batch, heads, len_q, v.shape[-1])


# --- more, in the styles of the papers and of libraries ---------------------------------------


@alternative("flash_attention", "FlashAttention-1's update: the output is kept normalised after every tile, "
                                "O = (l e^(m - m') O + e^(S - m') V) / l'")
def flash_normalised_output(q, k, v, causal=False, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    len_q, len_k = q.shape[-2], k.shape[-2]
    shift = len_k - len_q
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        o = out[..., q0:q1, :].clone()
        m = torch.full_like(o[..., :1], float("-inf"))
        ell = torch.zeros_like(o[..., :1])                # the paper's l
        for k0 in range(0, len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            s = q[..., q0:q1, :] @ k[..., k0:k1, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
            if causal:
                s = s.masked_fill(torch.arange(k0, k1, device=q.device)[None, :]
                                  > torch.arange(q0, q1, device=q.device)[:, None] + shift, float("-inf"))
            m_tile = s.amax(-1, keepdim=True)
            m_new = torch.maximum(m, m_tile)
            ref = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - ref)
            l_new = torch.exp(m - ref) * ell + p.sum(-1, keepdim=True)
            safe_l = torch.where(l_new > 0, l_new, torch.ones_like(l_new))
            o = (torch.exp(m - ref) * ell * o + p @ v[..., k0:k1, :]) / safe_l
            m, ell = m_new, l_new
        out[..., q0:q1, :] = o
    return out


@alternative("sliding_window_mask", "one comparison of the offset matrix i - j, in int64, against [0, window) "
                                    "and of the key index against n_global")
def mask_from_offsets(seq_len, window, n_global=0, device=None):
    if window < 1 or n_global < 0:
        raise ValueError(f"need window >= 1 and n_global >= 0, got {window} and {n_global}")
    positions = torch.arange(seq_len, dtype=torch.int64, device=device)
    offset = positions[:, None] - positions[None, :]
    return (offset >= 0) & ((offset < window) | (positions[None, :] < n_global))


@alternative("sliding_window_attention", "Mistral's rolling view, one query at a time: its window of keys and the "
                                         "global keys before it, a softmax over at most window + n_global scores")
def sliding_per_query(q, k, v, window, n_global=0):
    outputs = []
    scale = 1.0 / math.sqrt(q.shape[-1])
    for i in range(q.shape[-2]):
        first = max(0, i - window + 1)
        keys = torch.cat([k[..., :min(n_global, first), :], k[..., first:i + 1, :]], dim=-2)
        values = torch.cat([v[..., :min(n_global, first), :], v[..., first:i + 1, :]], dim=-2)
        weights = torch.softmax((q[..., i:i + 1, :] @ keys.transpose(-2, -1)) * scale, dim=-1)
        outputs.append(weights @ values)
    return torch.cat(outputs, dim=-2)


@alternative("linear_attention", "chunked, as linear-attention kernels compute it: inside a chunk of 4 the "
                                 "masked quadratic form, across chunks the state (S, z) carried from the last one")
def linear_chunked(q, k, v, causal=True, eps=1e-6):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    if not causal:
        S = phi_k.transpose(-2, -1) @ v
        return (phi_q @ S) / (phi_q @ phi_k.sum(-2).unsqueeze(-1) + eps)
    S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype, device=q.device)
    z = torch.zeros(*q.shape[:-2], 1, q.shape[-1], dtype=q.dtype, device=q.device)
    outputs = []
    for c0 in range(0, q.shape[-2], 4):
        c1 = min(c0 + 4, q.shape[-2])
        fq, fk, vc = phi_q[..., c0:c1, :], phi_k[..., c0:c1, :], v[..., c0:c1, :]
        inside = torch.tril(fq @ fk.transpose(-2, -1))
        numerator = fq @ S + inside @ vc
        denominator = (fq * z).sum(-1, keepdim=True) + inside.sum(-1, keepdim=True) + eps
        outputs.append(numerator / denominator)
        S = S + fk.transpose(-2, -1) @ vc
        z = z + fk.sum(-2, keepdim=True)
    return torch.cat(outputs, dim=-2)


@alternative("repeat_kv", "torch.repeat_interleave on the head axis")
def repeat_kv_interleave(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)


@alternative("grouped_query_attention", "a loop over the key/value heads: each group's n_rep query heads stacked "
                                        "as one (n_rep * Lq, d) matrix against its own keys, outputs concatenated")
def gqa_loop_over_groups(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads != 0:
        raise ValueError(f"{heads} query heads do not split into {kv_heads} groups")
    n_rep = heads // kv_heads
    keep = None if mask is None else torch.broadcast_to(mask, (batch, heads, len_q, len_k))
    outputs = []
    for g in range(kv_heads):
        group = q[:, g * n_rep:(g + 1) * n_rep].reshape(batch, n_rep * len_q, d)
        scores = group @ k[:, g].transpose(-2, -1) / math.sqrt(d)                    # (B, n_rep * Lq, Lk)
        if keep is not None:
            group_keep = keep[:, g * n_rep:(g + 1) * n_rep].reshape(batch, n_rep * len_q, len_k)
            scores = scores.masked_fill(~group_keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        outputs.append((weights @ v[:, g]).reshape(batch, n_rep, len_q, v.shape[-1]))
    return torch.cat(outputs, dim=1)


# --- float32 inside, as widely used code computes: every point but the float64 precision cell ---------

_PRECISION = ("test_float64_precision",)


@alternative("flash_attention", "as FlashAttention kernels keep it: the running max, sum and accumulator in float32 "
                                "whatever the input dtype (registers are float32), the output cast back to q's dtype",
             loses=_PRECISION)
def flash_float32_statistics(q, k, v, causal=False, block_size=64):
    if block_size < 1:
        raise ValueError("block_size must be >= 1")
    len_q, len_k = q.shape[-2], k.shape[-2]
    shift, scale = len_k - len_q, q.shape[-1] ** -0.5
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for q0 in range(0, len_q, block_size):
        q1 = min(q0 + block_size, len_q)
        q_tile = q[..., q0:q1, :].float() * scale
        m = torch.full((*q.shape[:-2], q1 - q0, 1), float("-inf"), device=q.device)     # float32
        ell = torch.zeros((*q.shape[:-2], q1 - q0, 1), device=q.device)
        acc = torch.zeros((*q.shape[:-2], q1 - q0, v.shape[-1]), device=q.device)
        for k0 in range(0, min(len_k, q1 + shift) if causal else len_k, block_size):
            k1 = min(k0 + block_size, len_k)
            s = q_tile @ k[..., k0:k1, :].float().transpose(-2, -1)
            if causal:
                rows = torch.arange(q0, q1, device=q.device)[:, None] + shift
                s = s.masked_fill(torch.arange(k0, k1, device=q.device) > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            base = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
            p, c = torch.exp(s - base), torch.exp(m - base)
            ell = c * ell + p.sum(-1, keepdim=True)
            acc = c * acc + p @ v[..., k0:k1, :].float()
            m = m_new
        out[..., q0:q1, :] = (acc / torch.where(ell == 0, torch.ones_like(ell), ell)).to(q.dtype)
    return out


@alternative("sliding_window_attention", "Longformer's sliding chunks: the sequence padded to a multiple of 2 * window "
                                         "and split into L / window - 1 overlapping chunks of 2 * window positions "
                                         "(as_strided), one einsum for every chunk's scores, the global keys as extra "
                                         "columns; the softmax in float32 'for numerical stability', cast back with "
                                         "type_as", loses=_PRECISION)
def sliding_longformer_chunks(q, k, v, window, n_global=0):
    *lead, length, d = q.shape
    w, dv = window, v.shape[-1]
    padded = -(-length // (2 * w)) * 2 * w                       # a multiple of 2 * window
    n = padded // w - 1                                          # overlapping chunks [c w, c w + 2 w)

    def flat(t):                                                 # (..., L, e) -> (B * H, padded, e)
        return F.pad(t, (0, 0, 0, padded - length)).reshape(-1, padded, t.shape[-1])

    def chunks(t):                                               # (B * H, padded, e) -> (B * H, n, 2 w, e), a view
        strides = (t.stride(0), w * t.stride(1), t.stride(1), t.stride(2))
        return t.as_strided((t.shape[0], n, 2 * w, t.shape[2]), strides)

    qf, kf, vf = flat(q), flat(k), flat(v)
    scores = torch.einsum("bcxd,bcyd->bcxy", chunks(qf), chunks(kf)) / math.sqrt(d)    # (B * H, n, 2 w, 2 w)
    i = torch.arange(padded, device=q.device)
    chunk = (i // w - 1).clamp(min=0)                            # query i reads chunk max(0, i // w - 1) ...
    row = i - w * chunk                                          # ... as its row i - w * chunk
    j = w * chunk[:, None] + torch.arange(2 * w, device=q.device)
    local = scores[:, chunk, row].masked_fill(~((j <= i[:, None]) & (i[:, None] - j < w)), float("-inf"))
    g = min(n_global, length)
    jg = torch.arange(g, device=q.device)
    glob = (torch.einsum("bid,bjd->bij", qf, kf[:, :g]) / math.sqrt(d)).masked_fill(
        ~((jg <= i[:, None]) & (i[:, None] - jg >= w)), float("-inf"))                 # global keys out of the window
    probs = F.softmax(torch.cat([glob, local], dim=-1), dim=-1, dtype=torch.float32).type_as(local)
    probs = probs.nan_to_num(0.0)                                # padded rows past the end see no key
    band = torch.zeros_like(scores)
    band[:, chunk, row] = probs[..., g:]
    out_local = torch.einsum("bcxy,bcye->bcxe", band, chunks(vf))                     # (B * H, n, 2 w, dv)
    out = out_local[:, chunk, row] + torch.einsum("bij,bje->bie", probs[..., :g], vf[:, :g])
    return out[:, :length].reshape(*lead, length, dv)


@alternative("linear_attention", "flash-linear-attention's recurrent reference: q, k, v cast to float32, the state "
                                 "(S, z) accumulated in float32 one position at a time, the output cast back to q's "
                                 "dtype", loses=_PRECISION)
def linear_float32_state(q, k, v, causal=True, eps=1e-6):
    dtype = q.dtype
    phi_q, phi_k, v32 = F.elu(q.float()) + 1, F.elu(k.float()) + 1, v.float()
    if not causal:
        S, z = phi_k.transpose(-2, -1) @ v32, phi_k.sum(-2)
        return ((phi_q @ S) / ((phi_q * z[..., None, :]).sum(-1, keepdim=True) + eps)).to(dtype)
    S = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], device=q.device)           # float32 state
    z = torch.zeros(*q.shape[:-2], q.shape[-1], device=q.device)
    outs = []
    for t in range(q.shape[-2]):
        S = S + phi_k[..., t, :, None] * v32[..., t, None, :]
        z = z + phi_k[..., t, :]
        outs.append((phi_q[..., t, None, :] @ S)[..., 0, :] / ((phi_q[..., t, :] * z).sum(-1, keepdim=True) + eps))
    return torch.stack(outs, dim=-2).to(dtype)


@alternative("linear_attention_step", "flash-linear-attention's recurrent step: the state (S, z) kept in float32 "
                                      "whatever the inputs' dtype, the output cast back to it", loses=_PRECISION)
def step_float32_state(q_t, k_t, v_t, state=None):
    phi_q, phi_k = F.elu(q_t.float()) + 1, F.elu(k_t.float()) + 1
    update = phi_k[..., :, None] * v_t.float()[..., None, :]
    S = update if state is None else state[0].float() + update
    z = phi_k if state is None else state[1].float() + phi_k
    out = (phi_q[..., None, :] @ S)[..., 0, :] / ((phi_q * z).sum(-1, keepdim=True) + 1e-6)
    return out.to(q_t.dtype), (S, z)


@alternative("grouped_query_attention", "Hugging Face's eager attention: the softmax in float32 "
                                        "(softmax(..., dtype=torch.float32).to(q.dtype)), the group's query heads as "
                                        "rows of one matrix, the mask as an additive bias of the dtype's minimum",
             loses=_PRECISION)
def gqa_hf_float32_softmax(q, k, v, mask=None):
    batch, heads, len_q, d = q.shape
    kv_heads, len_k = k.shape[1], k.shape[2]
    if heads % kv_heads:
        raise ValueError(f"num_heads ({heads}) must be divisible by num_key_value_heads ({kv_heads})")
    n_rep = heads // kv_heads
    query = q.reshape(batch, kv_heads, n_rep * len_q, d)
    attn_weights = torch.matmul(query, k.transpose(2, 3)) * d ** -0.5
    if mask is not None:
        keep = torch.broadcast_to(mask, (batch, heads, len_q, len_k)).reshape(batch, kv_heads, n_rep * len_q, len_k)
        attn_weights = attn_weights + torch.zeros_like(attn_weights).masked_fill(~keep, torch.finfo(q.dtype).min)
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
    if mask is not None:
        attn_weights = attn_weights.masked_fill(~keep.any(-1, keepdim=True), 0.0)     # no key at all: zeros
    return torch.matmul(attn_weights, v).reshape(batch, heads, len_q, v.shape[-1])
