"""Mutation catalogue for a4_kv_cache: realistic wrong implementations, one bug each.
`python -m grader check a4_kv_cache` proves every one of them loses points."""

import torch
import torch.nn.functional as F

from grader.mutants import mutant


def _full_forward(self, ids):
    """The correct uncached forward (shared by the lm_forward mutants, whose bugs are in the cached path)."""
    length = ids.shape[1]
    if length > self.max_len:
        raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
    x = self.tok_emb(ids) + self.pos_emb(torch.arange(length, device=ids.device))
    mask = causal_mask(length, device=ids.device)
    for block in self.blocks:
        x = block(x, mask)
    return self.lm_head(self.norm_f(x))


def _cached_blocks(self, x, cache):
    for i, block in enumerate(self.blocks):
        x = x + cached_attention(block.attn, block.norm1(x), cache, i)
        x = x + block.ff(block.norm2(x))
    return x


def _project(attn, x):
    return (split_heads(attn.q_proj(x), attn.n_heads), split_heads(attn.k_proj(x), attn.n_heads),
            split_heads(attn.v_proj(x), attn.n_heads))


def _shifted_causal(new, start, device):
    return torch.ones(new, start + new, dtype=torch.bool, device=device).tril(diagonal=start)


# --- KVCache ---------------------------------------------------------------------------------


def _preallocate(cache, n_layers, batch_size, n_heads, d_head, max_len, dtype, device):
    """The correct KVCache.__init__ (shared by the mutants whose bugs are in append/advance)."""
    shape = (batch_size, n_heads, max_len, d_head)
    cache.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
    cache.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
    cache.max_len = max_len
    cache.length = 0


def _reorder_rows(cache, index):
    """The correct KVCache.reorder (shared by the mutants whose bugs are in __init__, append or advance)."""
    cache.keys = [k.index_select(0, index) for k in cache.keys]
    cache.values = [v.index_select(0, index) for v in cache.values]


@mutant("KVCache", "not preallocated: grows the past with torch.cat at every append",
        fails=("test_kv_cache", "test_make_cache_memory", "test_cached_step_flops"))
class grows_with_cat:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        empty = torch.zeros(batch_size, n_heads, 0, d_head, dtype=dtype, device=device)
        self.keys = [empty.clone() for _ in range(n_layers)]
        self.values = [empty.clone() for _ in range(n_layers)]
        self.max_len = max_len
        self.length = 0

    def append(self, layer, k, v):
        if self.length + k.shape[2] > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} + {k.shape[2]} > max_len={self.max_len}")
        self.keys[layer] = torch.cat([self.keys[layer][:, :, :self.length], k], dim=2)
        self.values[layer] = torch.cat([self.values[layer][:, :, :self.length], v], dim=2)
        return self.keys[layer], self.values[layer]

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} + {n} > max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        _reorder_rows(self, index)


def _append_in_place(cache, layer, k, v):
    """The correct KVCache.append (shared by the mutants whose bugs are in __init__ or reorder)."""
    end = cache.length + k.shape[2]
    if end > cache.max_len:
        raise ValueError(f"KV cache overflow: {cache.length} + {k.shape[2]} > max_len={cache.max_len}")
    cache.keys[layer][:, :, cache.length:end] = k
    cache.values[layer][:, :, cache.length:end] = v
    return cache.keys[layer][:, :, :end], cache.values[layer][:, :, :end]


@mutant("KVCache", "buffers created with torch.zeros and no dtype=: the dtype asked for is ignored (always float32)",
        fails=("test_kv_cache",))
class ignores_dtype:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, torch.float32, device)

    def append(self, layer, k, v):
        return _append_in_place(self, layer, k, v)

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} + {n} > max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        _reorder_rows(self, index)


@mutant("KVCache", "reorder builds new buffers with torch.zeros and no dtype=: a float64 or bfloat16 cache becomes "
                   "float32", fails=("test_kv_cache_reorder",))
class reorder_loses_dtype:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, dtype, device)

    def append(self, layer, k, v):
        return _append_in_place(self, layer, k, v)

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} + {n} > max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        for rows in (self.keys, self.values):
            for layer, old in enumerate(rows):
                new = torch.zeros(index.shape[0], *old.shape[1:], device=old.device)
                new[:] = old.index_select(0, index)
                rows[layer] = new


@mutant("KVCache", "always writes the new keys at position 0 (forgets the offset length)",
        fails=("test_kv_cache", "test_cached_logits_match"))
class writes_at_start:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, dtype, device)

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {end} > max_len={self.max_len}")
        self.keys[layer][:, :, :k.shape[2]] = k
        self.values[layer][:, :, :k.shape[2]] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length + n} > max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        _reorder_rows(self, index)


@mutant("KVCache", "no overflow check: writing past max_len fails with a RuntimeError (shape mismatch), not ValueError",
        fails=("test_kv_cache", "test_kv_cache_reorder"))
class no_overflow_check:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, dtype, device)

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        self.keys[layer][:, :, self.length:end] = k
        self.values[layer][:, :, self.length:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        self.length += n

    def reorder(self, index):
        _reorder_rows(self, index)


@mutant("KVCache", "off-by-one overflow check: refuses to fill the cache exactly (>= instead of >)",
        fails=("test_kv_cache", "test_cache_overflow", "test_kv_cache_reorder"))
class refuses_exactly_full:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, dtype, device)

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        if end >= self.max_len:
            raise ValueError(f"KV cache overflow: {end} >= max_len={self.max_len}")
        self.keys[layer][:, :, self.length:end] = k
        self.values[layer][:, :, self.length:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        if self.length + n >= self.max_len:
            raise ValueError(f"KV cache overflow: {self.length + n} >= max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        _reorder_rows(self, index)


# --- cached_attention ------------------------------------------------------------------------


@mutant("cached_attention", "new keys not stored: attends to the cache plus the new keys, but never writes them",
        fails=("test_cached_attention", "test_cached_logits_match"))
def new_keys_not_stored(attn, x, cache, layer):
    q, k, v = _project(attn, x)
    start, new = cache.length, x.shape[1]
    keys = torch.cat([cache.keys[layer][:, :, :start], k], dim=2)
    values = torch.cat([cache.values[layer][:, :, :start], v], dim=2)
    mask = _shifted_causal(new, start, x.device) if new > 1 else None
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.o_proj(merge_heads(out))


@mutant("cached_attention", "prefill without a causal mask (assumes the cache makes it causal)",
        fails=("test_cached_attention", "test_cached_logits_match"))
def prefill_without_mask(attn, x, cache, layer):
    q, k, v = _project(attn, x)
    keys, values = cache.append(layer, k, v)
    out, _ = scaled_dot_product_attention(q, keys, values)
    return attn.o_proj(merge_heads(out))


@mutant("cached_attention", "causal mask not shifted by the cached length (tril() on an (L, length+L) mask)",
        fails=("test_cached_attention", "test_cached_logits_match"))
def mask_not_shifted(attn, x, cache, layer):
    new = x.shape[1]
    start = cache.length
    q = split_heads(attn.q_proj(x), attn.n_heads)               # (B, H, L, Dh)
    k = split_heads(attn.k_proj(x), attn.n_heads)
    v = split_heads(attn.v_proj(x), attn.n_heads)
    keys, values = cache.append(layer, k, v)                     # (B, H, start + L, Dh)
    mask = None
    if new > 1:
        mask = torch.ones(new, start + new, dtype=torch.bool, device=x.device).tril()
    out, weights = scaled_dot_product_attention(q, keys, values, mask)
    attn.last_attn_weights = weights
    return attn.o_proj(merge_heads(out))


@mutant("cached_attention", "attends to the whole preallocated buffer, unwritten zero slots included",
        fails=("test_cached_attention", "test_cached_logits_match"))
def attends_whole_buffer(attn, x, cache, layer):
    q, k, v = _project(attn, x)
    start, new = cache.length, x.shape[1]
    cache.append(layer, k, v)
    keys, values = cache.keys[layer], cache.values[layer]
    mask = torch.ones(new, keys.shape[2], dtype=torch.bool, device=x.device).tril(diagonal=start)
    mask[:, :start + new] = _shifted_causal(new, start, x.device)
    mask[:, start + new:] = True
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.o_proj(merge_heads(out))


@mutant("cached_attention", "attends to the past before appending: the new token does not see itself",
        fails=("test_cached_attention", "test_cached_logits_match"))
def appends_after_attention(attn, x, cache, layer):
    q, k, v = _project(attn, x)
    start, new = cache.length, x.shape[1]
    if start == 0:
        keys, values = cache.append(layer, k, v)
        mask = _shifted_causal(new, start, x.device)
    else:
        keys, values = cache.keys[layer][:, :, :start], cache.values[layer][:, :, :start]
        mask = None
        cache.append(layer, k, v)
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.o_proj(merge_heads(out))


@mutant("cached_attention", "calls torch's built-in attention (forbidden)", fails=("test_cached_attention",))
def uses_builtin_sdpa(attn, x, cache, layer):
    q, k, v = _project(attn, x)
    start, new = cache.length, x.shape[1]
    keys, values = cache.append(layer, k, v)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=_shifted_causal(new, start, x.device))
    return attn.o_proj(merge_heads(out))


# --- lm_make_cache / lm_forward --------------------------------------------------------------


@mutant("lm_make_cache", "ignores max_len: always allocates the model's max_len",
        fails=("test_make_cache_memory",))
def ignores_max_len(self, batch_size, max_len=None):
    max_len = self.max_len if max_len is None else max_len
    if max_len > self.max_len:
        raise ValueError(f"cache max_len={max_len} exceeds the model's max_len={self.max_len}")
    d_model = self.tok_emb.embedding_dim
    n_heads = self.blocks[0].attn.n_heads
    weight = self.lm_head.weight
    return KVCache(len(self.blocks), batch_size, n_heads, d_model // n_heads, self.max_len,
                   dtype=weight.dtype, device=weight.device)


@mutant("lm_make_cache", "cache always float32, whatever the model's dtype", fails=("test_make_cache_memory",))
def always_float32(self, batch_size, max_len=None):
    max_len = self.max_len if max_len is None else max_len
    if max_len > self.max_len:
        raise ValueError(f"max_len={max_len} exceeds the model's {self.max_len}")
    d_model, n_heads = self.tok_emb.embedding_dim, self.blocks[0].attn.n_heads
    return KVCache(len(self.blocks), batch_size, n_heads, d_model // n_heads, max_len,
                   device=self.lm_head.weight.device)


@mutant("lm_make_cache", "stores d_model per head (forgets to divide by n_heads): n_heads times the memory",
        fails=("test_make_cache_memory",))
def d_model_per_head(self, batch_size, max_len=None):
    max_len = self.max_len if max_len is None else max_len
    if max_len > self.max_len:
        raise ValueError(f"max_len={max_len} exceeds the model's {self.max_len}")
    d_model, n_heads = self.tok_emb.embedding_dim, self.blocks[0].attn.n_heads
    weight = self.lm_head.weight
    return KVCache(len(self.blocks), batch_size, n_heads, d_model, max_len, dtype=weight.dtype, device=weight.device)


@mutant("lm_forward", "positions restart at 0 for every call with a cache",
        fails=("test_cached_logits_match", "test_positions_continue"))
def positions_restart(self, ids, cache=None):
    if cache is None:
        return _full_forward(self, ids)
    new = ids.shape[1]
    if cache.length + new > min(self.max_len, cache.max_len):
        raise ValueError("too many tokens for the cache")
    x = self.tok_emb(ids) + self.pos_emb(torch.arange(new, device=ids.device))
    x = _cached_blocks(self, x, cache)
    cache.advance(new)
    return self.lm_head(self.norm_f(x))


@mutant("lm_forward", "cache never advanced: every step overwrites the same slots (new keys lost)",
        fails=("test_cached_logits_match",))
def never_advances(self, ids, cache=None):
    if cache is None:
        return _full_forward(self, ids)
    new, start = ids.shape[1], cache.length
    if start + new > min(self.max_len, cache.max_len):
        raise ValueError("too many tokens for the cache")
    x = self.tok_emb(ids) + self.pos_emb(torch.arange(start, start + new, device=ids.device))
    return self.lm_head(self.norm_f(_cached_blocks(self, x, cache)))


@mutant("lm_forward", "advances the cache once per layer instead of once per call",
        fails=("test_cached_logits_match",))
def advances_per_layer(self, ids, cache=None):
    if cache is None:
        return _full_forward(self, ids)
    new, start = ids.shape[1], cache.length
    x = self.tok_emb(ids) + self.pos_emb(torch.arange(start, start + new, device=ids.device))
    for i, block in enumerate(self.blocks):
        x = x + cached_attention(block.attn, block.norm1(x), cache, i)
        x = x + block.ff(block.norm2(x))
        cache.advance(new)
    return self.lm_head(self.norm_f(x))


@mutant("lm_forward", "uncached path without the causal mask", fails=("test_forward_without_cache",))
def uncached_not_causal(self, ids, cache=None):
    new = ids.shape[1]
    start = 0 if cache is None else cache.length
    if start + new > (self.max_len if cache is None else min(self.max_len, cache.max_len)):
        raise ValueError("too many tokens")
    x = self.tok_emb(ids) + self.pos_emb(torch.arange(start, start + new, device=ids.device))
    if cache is None:
        for block in self.blocks:
            x = block(x)
    else:
        x = _cached_blocks(self, x, cache)
        cache.advance(new)
    return self.lm_head(self.norm_f(x))


# --- sampling --------------------------------------------------------------------------------


def _check_arguments(temperature, top_k, top_p):
    """The correct argument checks (shared by the mutants whose bugs are elsewhere)."""
    if temperature < 0:
        raise ValueError(f"temperature {temperature} < 0")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k {top_k} < 1")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p {top_p} outside (0, 1]")


def _top_k_softmax(logits, temperature, top_k):
    """softmax(logits / temperature) restricted to the top_k largest logits (correct)."""
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, min(top_k, scaled.shape[-1]), dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.softmax(scaled, dim=-1)


def _nucleus_mask(probs, top_p, inclusive=True, at_least_one=True):
    """Which tokens top-p keeps. inclusive: the token whose cumulative sum crosses top_p too."""
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = sorted_probs.cumsum(dim=-1)
    keep_sorted = (cumulative - sorted_probs < top_p) if inclusive else (cumulative < top_p)
    if at_least_one:
        keep_sorted[..., 0] = True
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def _renormalised(probs, keep):
    probs = probs.masked_fill(~keep, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


@mutant("next_token_probs", "top-p drops the token whose cumulative probability crosses top_p (keeps cumsum < top_p, "
        "plus the first)", fails=("test_next_token_probs", "test_sample_next_token"))
def top_p_excludes_crossing_token(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    probs = _top_k_softmax(logits, temperature, top_k)
    if top_p is not None:
        probs = _renormalised(probs, _nucleus_mask(probs, top_p, inclusive=False))
    return probs


@mutant("next_token_probs", "top-p keeps cumsum < top_p and nothing else: a row whose top token alone passes top_p "
        "keeps no token (NaN)", fails=("test_next_token_probs",))
def top_p_can_keep_nothing(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    probs = _top_k_softmax(logits, temperature, top_k)
    if top_p is not None:
        probs = _renormalised(probs, _nucleus_mask(probs, top_p, inclusive=False, at_least_one=False))
    return probs


@mutant("next_token_probs", "top-p chosen on softmax(logits) before the temperature is applied",
        fails=("test_next_token_probs",))
def top_p_before_temperature(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    probs = _top_k_softmax(logits, temperature, top_k)
    if top_p is not None:
        probs = _renormalised(probs, _nucleus_mask(_top_k_softmax(logits, 1.0, top_k), top_p))
    return probs


@mutant("next_token_probs", "top-p applied to the full softmax, before top-k (the nucleus of the wrong distribution)",
        fails=("test_next_token_probs",))
def top_p_before_top_k(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    probs = _top_k_softmax(logits, temperature, None)
    if top_p is not None:
        probs = _renormalised(probs, _nucleus_mask(probs, top_p))
    if top_k is not None:
        kth = torch.topk(probs, min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]
        probs = _renormalised(probs, probs >= kth)
    return probs


@mutant("next_token_probs", "top-p zeroes the dropped tokens but does not renormalise",
        fails=("test_next_token_probs",))
def top_p_not_renormalised(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    probs = _top_k_softmax(logits, temperature, top_k)
    if top_p is not None:
        probs = probs.masked_fill(~_nucleus_mask(probs, top_p), 0.0)
    return probs


@mutant("next_token_probs", "top_k larger than the vocabulary: torch.topk raises a RuntimeError instead of keeping all",
        fails=("test_sampling_edge_cases",))
def top_k_beyond_vocab_raises(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, top_p)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    return probs if top_p is None else _renormalised(probs, _nucleus_mask(probs, top_p))


@mutant("next_token_probs", "top_p=1.0 rejected (checks 0 < top_p < 1 instead of 0 < top_p <= 1)",
        fails=("test_sampling_edge_cases",))
def top_p_one_rejected(logits, temperature=1.0, top_k=None, top_p=None):
    _check_arguments(temperature if temperature != 0 else -1, top_k, None)
    if top_p is not None and not 0 < top_p < 1:
        raise ValueError(f"top_p {top_p} outside (0, 1)")
    probs = _top_k_softmax(logits, temperature, top_k)
    return probs if top_p is None else _renormalised(probs, _nucleus_mask(probs, top_p))


@mutant("next_token_probs", "no argument checks: temperature 0 divides by zero (NaN), top_k=0 and top_p=0 fail "
        "with other errors or silently", fails=("test_sampling_edge_cases",))
def no_argument_checks(logits, temperature=1.0, top_k=None, top_p=None):
    probs = _top_k_softmax(logits, temperature, top_k)
    return probs if top_p is None else _renormalised(probs, _nucleus_mask(probs, top_p))


@mutant("sample_next_token", "a negative temperature is taken as greedy (temperature <= 0) instead of refused",
        fails=("test_sampling_edge_cases",))
def negative_temperature_greedy(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1 (or None), got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (or None), got {top_p}")
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@mutant("sample_next_token", "does not pass top_p on to next_token_probs (top-p silently ignored)",
        fails=("test_sample_next_token", "test_generate_sampling"))
def ignores_top_p(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    _check_arguments(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    return torch.multinomial(next_token_probs(logits, temperature, top_k), 1, generator=generator).squeeze(-1)


@mutant("next_token_probs", "top-k keeps k-1 candidates (masks logits <= the k-th largest)",
        fails=("test_next_token_probs", "test_sample_next_token"))
def top_k_minus_one(logits, temperature=1.0, top_k=None, top_p=None):
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled <= kth, float("-inf"))
    return torch.softmax(scaled, dim=-1).nan_to_num(0.0)


@mutant("next_token_probs", "multiplies the logits by the temperature instead of dividing",
        fails=("test_next_token_probs", "test_sample_next_token"))
def temperature_multiplies(logits, temperature=1.0, top_k=None, top_p=None):
    scaled = logits * temperature
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.softmax(scaled, dim=-1)


@mutant("next_token_probs",
        "divides the probabilities by the temperature after the softmax (no effect once renormalised)",
        fails=("test_next_token_probs",))
def temperature_after_softmax(logits, temperature=1.0, top_k=None, top_p=None):
    scaled = logits
    if top_k is not None:
        kth = torch.topk(scaled, top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1) / temperature
    return probs / probs.sum(-1, keepdim=True)


@mutant("next_token_probs", "top-k by zeroing probabilities without renormalising",
        fails=("test_next_token_probs",))
def top_k_not_renormalised(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = torch.topk(probs, top_k, dim=-1).values[..., -1:]
        probs = probs.masked_fill(probs < kth, 0.0)
    return probs


@mutant("sample_next_token", "ignores the generator: draws from the global RNG",
        fails=("test_sample_next_token", "test_generate_sampling"))
def ignores_generator(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    _check_arguments(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)
    return torch.multinomial(next_token_probs(logits, temperature, top_k, top_p), 1).squeeze(-1)


@mutant("sample_next_token", "greedy applies top-k sampling instead of the argmax", fails=("test_sample_next_token",))
def greedy_samples_with_top_k(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    _check_arguments(temperature, top_k, top_p)
    if temperature == 0 and top_k is None:
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature or 1.0, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


# --- generate --------------------------------------------------------------------------------


def _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator,
              position=-1, steps_offset=0, whole_context_with_cache=False, keep_prompt=True, top_p=None):
    batch, prompt_len = prompt_ids.shape
    if prompt_len + max_new_tokens > model.max_len:
        raise ValueError(f"{prompt_len} + {max_new_tokens} tokens exceed max_len={model.max_len}")
    ids = prompt_ids
    with torch.no_grad():
        cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens) if use_cache else None
        logits = model(ids, cache=cache)[:, position] if use_cache else model(ids)[:, position]
        for step in range(max_new_tokens + steps_offset):
            token = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            ids = torch.cat([ids, token[:, None]], dim=1)
            if use_cache and not whole_context_with_cache:
                logits = model(token[:, None], cache=cache)[:, position] if step < max_new_tokens - 1 else logits
            else:
                logits = model(ids)[:, position] if step < max_new_tokens - 1 else logits
    return ids if keep_prompt else ids[:, prompt_len:]


@mutant("generate", "takes the logits of the first position instead of the last",
        fails=("test_generate_greedy", "test_generate_sampling"))
def first_position_logits(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                          top_p=None, generator=None):
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator, position=0,
                     top_p=top_p)


@mutant("generate", "off by one: generates max_new_tokens - 1 tokens", fails=("test_generate_greedy",))
def one_token_short(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                    top_p=None, generator=None):
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator, steps_offset=-1,
                     top_p=top_p)


@mutant("generate", "returns only the new tokens, without the prompt", fails=("test_generate_greedy",))
def drops_prompt(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None,
                 generator=None):
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator, keep_prompt=False,
                     top_p=top_p)


@mutant("generate", "feeds the whole sequence every step even with use_cache=True (the cache is filled but unused)",
        fails=("test_generate_uses_cache",))
def whole_sequence_every_step(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                              top_p=None, generator=None):
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator,
                     whole_context_with_cache=True, top_p=top_p)


@mutant("generate", "uncached mode only feeds the last token (no context at all)",
        fails=("test_generate_sampling", "test_generate_uses_cache"))
def uncached_without_context(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                             top_p=None, generator=None):
    batch, prompt_len = prompt_ids.shape
    if prompt_len + max_new_tokens > model.max_len:          # before any work
        raise ValueError(f"a prompt of {prompt_len} tokens + {max_new_tokens} new ones exceeds the model's "
                         f"max_len={model.max_len}")
    model_device = next(model.parameters()).device
    out = torch.empty(batch, prompt_len + max_new_tokens, dtype=torch.long, device=model_device)
    out[:, :prompt_len] = prompt_ids
    if max_new_tokens == 0:
        return out.to(prompt_ids.device)
    with torch.no_grad():
        if use_cache:
            cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens)
            logits = model(out[:, :prompt_len], cache=cache)[:, -1]          # prefill
        else:
            logits = model(out[:, :prompt_len])[:, -1]
        for step in range(max_new_tokens):
            position = prompt_len + step
            out[:, position] = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            if step == max_new_tokens - 1:
                break
            if use_cache:
                logits = model(out[:, position:position + 1], cache=cache)[:, -1]   # one new token
            else:
                logits = model(out[:, position:position + 1])[:, -1]                # the new token
    return out.to(prompt_ids.device)


@mutant("generate", "no length check of its own: without the cache the model runs step after step until its own "
        "max_len error", fails=("test_sampling_edge_cases",))
def length_found_by_the_model(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                              top_p=None, generator=None):
    batch, prompt_len = prompt_ids.shape
    ids = prompt_ids
    with torch.no_grad():
        cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens) if use_cache else None
        for step in range(max_new_tokens):
            if use_cache:
                logits = model(ids if step == 0 else ids[:, -1:], cache=cache)[:, -1]
            else:
                logits = model(ids)[:, -1]
            token = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            ids = torch.cat([ids, token[:, None]], dim=1)
    if ids.shape[1] > model.max_len:
        raise ValueError("too long")
    return ids


@mutant("generate", "checks the length only without the cache; with it, a cache of the model's max_len overflows "
        "mid-generation, after the prefill", fails=("test_sampling_edge_cases",))
def length_checked_only_uncached(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                                 top_p=None, generator=None):
    batch, prompt_len = prompt_ids.shape
    if not use_cache and prompt_len + max_new_tokens > model.max_len:
        raise ValueError("too long")
    ids = prompt_ids
    with torch.no_grad():
        cache = model.make_cache(batch) if use_cache else None
        for step in range(max_new_tokens):
            if use_cache:
                logits = model(ids if step == 0 else ids[:, -1:], cache=cache)[:, -1]
            else:
                logits = model(ids)[:, -1]
            token = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            ids = torch.cat([ids, token[:, None]], dim=1)
    if use_cache and ids.shape[1] > model.max_len:
        raise ValueError("too long")
    return ids


@mutant("generate", "off by one: refuses L_prompt + max_new_tokens == max_len (>= instead of >)",
        fails=("test_generate_greedy", "test_sampling_edge_cases"))
def refuses_exactly_max_len(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                            top_p=None, generator=None):
    if prompt_ids.shape[1] + max_new_tokens >= model.max_len:
        raise ValueError("too long")
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator, top_p=top_p)


@mutant("generate", "does not pass top_p on to sample_next_token", fails=("test_generate_sampling",))
def generate_drops_top_p(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                         top_p=None, generator=None):
    return _generate(model, prompt_ids, max_new_tokens, use_cache, temperature, top_k, generator)


# --- KVCache.reorder -------------------------------------------------------------------------


class _AppendingCache:
    """The correct KVCache but for reorder (shared by the mutants whose bug is in reorder)."""

    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        _preallocate(self, n_layers, batch_size, n_heads, d_head, max_len, dtype, device)

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {end} > max_len={self.max_len}")
        self.keys[layer][:, :, self.length:end] = k
        self.values[layer][:, :, self.length:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length + n} > max_len={self.max_len}")
        self.length += n


@mutant("KVCache", "reorder moves the keys but not the values",
        fails=("test_kv_cache_reorder", "test_beam_search_cache"))
class reorder_keys_only(_AppendingCache):
    def reorder(self, index):
        self.keys = [k.index_select(0, index) for k in self.keys]


@mutant("KVCache", "reorder in place with copy_: works only while the number of rows stays the same",
        fails=("test_kv_cache_reorder", "test_beam_search", "test_beam_search_cache"))
class reorder_in_place(_AppendingCache):
    def reorder(self, index):
        for k, v in zip(self.keys, self.values):
            k.copy_(k[index])
            v.copy_(v[index])


@mutant("KVCache", "reorder applies the inverse permutation (argsort of index): row index[i] gets old row i",
        fails=("test_kv_cache_reorder", "test_beam_search_cache"))
class reorder_inverse(_AppendingCache):
    def reorder(self, index):
        inverse = torch.argsort(index)
        self.keys = [k.index_select(0, inverse) for k in self.keys]
        self.values = [v.index_select(0, inverse) for v in self.values]


@mutant("KVCache", "reorder keeps only the stored positions: no room is left for the next append",
        fails=("test_kv_cache_reorder", "test_beam_search", "test_beam_search_cache"))
class reorder_drops_room(_AppendingCache):
    def reorder(self, index):
        self.keys = [k[index, :, :, :][:, :, :self.length] for k in self.keys]
        self.values = [v[index, :, :, :][:, :, :self.length] for v in self.values]


# --- beam_search -----------------------------------------------------------------------------


def _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, reorder=True, accumulate=True,
                 lower_index_wins=True, one_child_per_beam=False, tiled=False, one_live_beam=True,
                 log_probs=True, result_beam=0, check_beams=True, check_length=True, prompt_offset=True):
    """Beam search with switches: each mutant below turns exactly one of them to its wrong setting."""
    batch, prompt_len = prompt_ids.shape
    if check_beams and num_beams < 1:
        raise ValueError(f"num_beams={num_beams}")
    if check_length and prompt_len + max_new_tokens > model.max_len:
        raise ValueError("too long")
    k = num_beams
    if tiled:
        first = torch.arange(batch, device=prompt_ids.device).repeat(k)
    else:
        first = torch.arange(batch, device=prompt_ids.device).repeat_interleave(k)
    beams = prompt_ids[first]
    with torch.no_grad():
        if use_cache and reorder:
            cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens)
            logits = model(prompt_ids, cache=cache)[:, -1][first]
            cache.reorder(first)
        elif use_cache:
            cache = model.make_cache(batch * k, max_len=prompt_len + max_new_tokens)
            logits = model(beams, cache=cache)[:, -1]
        else:
            logits = model(beams)[:, -1]
        scores = torch.full((batch, k), float("-inf"), device=prompt_ids.device)
        scores[:, 0] = 0.0
        if not one_live_beam:
            scores[:, 1:] = 0.0
        for step in range(max_new_tokens):
            step_scores = torch.log_softmax(logits.float(), dim=-1) if log_probs else logits.float()
            vocab = step_scores.shape[-1]
            if accumulate:
                candidates = scores[:, :, None] + step_scores.view(batch, k, vocab)
            else:
                alive = torch.where(scores.isinf(), scores, 0 * scores)     # -inf stays: only the live beams
                candidates = step_scores.view(batch, k, vocab) + alive[:, :, None]
            if one_child_per_beam:
                best = candidates.max(dim=-1, keepdim=True)
                candidates = torch.full_like(candidates, float("-inf")).scatter(-1, best.indices, best.values)
            candidates = candidates.view(batch, -1)
            if lower_index_wins:
                order = torch.sort(candidates, dim=-1, descending=True, stable=True).indices[:, :k]
            else:
                order = torch.sort(candidates, dim=-1, stable=True).indices.flip(-1)[:, :k]
            scores = candidates.gather(-1, order)
            if not accumulate:
                scores = torch.where(scores.isinf(), scores, 0 * scores)
            offset = torch.arange(batch, device=prompt_ids.device)[:, None] * k if prompt_offset else 0
            if tiled:
                offset = torch.arange(batch, device=prompt_ids.device)[:, None]
                rows = (offset + (order // vocab) * batch).view(-1)
            else:
                rows = (offset + order // vocab).view(-1)
            tokens = (order % vocab).view(-1, 1)
            beams = torch.cat([beams[rows], tokens], dim=1)
            if step == max_new_tokens - 1:
                break
            if use_cache:
                if reorder:
                    cache.reorder(rows)
                logits = model(tokens, cache=cache)[:, -1]
            else:
                logits = model(beams)[:, -1]
    if tiled:
        return beams.view(k, batch, -1)[result_beam]
    return beams.view(batch, k, -1)[:, result_beam]


@mutant("beam_search", "forgets KVCache.reorder: each prompt is prefilled num_beams times and cache row i keeps "
        "the past of whichever beam sat in row i first", fails=("test_beam_search_cache",))
def forgets_reorder(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, reorder=False)


@mutant("beam_search", "scores not accumulated: candidates ranked by the newest token's log-probability alone",
        fails=("test_beam_search",))
def scores_not_accumulated(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, accumulate=False)


@mutant("beam_search", "ties broken by the higher flat index (an ascending stable sort, flipped)",
        fails=("test_beam_search",))
def ties_to_higher_index(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, lower_index_wins=False)


@mutant("beam_search", "beams from the same parent collapsed: each beam proposes only its best token, so two "
        "children of one beam never both survive", fails=("test_beam_search",))
def one_child_per_beam(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, one_child_per_beam=True)


@mutant("beam_search", "prompt rows tiled (prompt.repeat(num_beams, 1)) where the beam bookkeeping expects each "
        "prompt's rows together, so beams of different prompts mix",
        fails=("test_beam_search", "test_beam_search_cache"))
def prompt_rows_tiled(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, tiled=True, prompt_offset=False)


@mutant("beam_search", "every beam starts live with score 0: the first step keeps num_beams copies of the best token",
        fails=("test_beam_search",))
def all_beams_start_live(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, one_live_beam=False)


@mutant("beam_search", "sums raw logits instead of log-probabilities (each beam's softmax normaliser ignored)",
        fails=("test_beam_search",))
def sums_logits(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, log_probs=False)


@mutant("beam_search", "returns the last surviving beam (the worst) instead of beam 0", fails=("test_beam_search",))
def returns_last_beam(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, result_beam=-1)


@mutant("beam_search", "no check of num_beams: num_beams=0 fails with a RuntimeError, not a ValueError",
        fails=("test_beam_search",))
def num_beams_unchecked(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, check_beams=False)


@mutant("beam_search", "no length check of its own: without the cache the model runs step after step until its "
        "max_len error", fails=("test_beam_search",))
def length_found_by_the_model_beams(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, check_length=False)


@mutant("beam_search", "parent rows without the prompt's offset (order // vocab, not p * num_beams + order // vocab): "
        "every prompt continues the first prompt's beams", fails=("test_beam_search", "test_beam_search_cache"))
def parents_without_prompt_offset(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    return _beam_search(model, prompt_ids, max_new_tokens, num_beams, use_cache, prompt_offset=False)
