"""Correct alternatives for a4_kv_cache: the cache, cached attention, incremental decoding, sampling
and generation written another way than the reference. `python -m grader check a4_kv_cache`
proves each keeps full marks."""
import math

import torch
import torch.nn.functional as F

from grader.mutants import alternative


def _overflow(stored, new, max_len):
    return ValueError(f"cannot add {new} positions to a KV cache holding {stored}: "
                      f"capacity is max_len={max_len}")


# --- KVCache ---------------------------------------------------------------------------------


@alternative("KVCache", "one preallocated buffer (2, layers, B, H, max_len, Dh); keys/values are tuples of "
                        "per-layer views into it")
class one_buffer:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.buffer = torch.zeros(2, n_layers, batch_size, n_heads, max_len, d_head, dtype=dtype, device=device)
        self.keys = tuple(self.buffer[0, layer] for layer in range(n_layers))
        self.values = tuple(self.buffer[1, layer] for layer in range(n_layers))
        self.max_len = max_len
        self.length = 0

    def append(self, layer, k, v):
        new = k.shape[-2]
        if self.length + new > self.max_len:
            raise _overflow(self.length, new, self.max_len)
        end = self.length + new
        self.keys[layer].narrow(2, self.length, new).copy_(k)
        self.values[layer].narrow(2, self.length, new).copy_(v)
        return self.keys[layer].narrow(2, 0, end), self.values[layer].narrow(2, 0, end)

    def advance(self, n):
        if self.length + n > self.max_len:
            raise _overflow(self.length, n, self.max_len)
        self.length = self.length + n

    def reorder(self, index):
        self.buffer = self.buffer.index_select(2, index)          # the batch axis of (2, layers, B, H, T, Dh)
        self.keys = tuple(self.buffer[0, layer] for layer in range(len(self.keys)))
        self.values = tuple(self.buffer[1, layer] for layer in range(len(self.values)))


@alternative("KVCache", "torch.empty buffers (never-written slots hold garbage, which nothing may read)")
class empty_buffers:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.keys = [torch.empty(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device)
                     for _ in range(n_layers)]
        self.values = [torch.empty_like(keys) for keys in self.keys]
        self.max_len, self.length = max_len, 0

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"cannot store {k.shape[2]} new positions after {self.length}: max_len is {self.max_len}")
        self.keys[layer][:, :, self.length:end] = k
        self.values[layer][:, :, self.length:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"cannot advance by {n} after {self.length}: max_len is {self.max_len}")
        self.length += n

    def reorder(self, index):
        # only the stored positions are moved: the rest of a torch.empty buffer holds nothing worth copying
        for layer in range(len(self.keys)):
            for store in (self.keys, self.values):
                moved = torch.empty((index.numel(),) + tuple(store[layer].shape[1:]), dtype=store[layer].dtype,
                                    device=store[layer].device)
                moved[:, :, :self.length] = store[layer][index, :, :self.length]
                store[layer] = moved


@alternative("KVCache",
             "storage laid out (B, max_len, H, Dh) per layer, keys/values permuted views; length a read-only property")
class sequence_major:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        shape = (batch_size, max_len, n_heads, d_head)
        self._k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self._v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.keys = [t.permute(0, 2, 1, 3) for t in self._k]          # (B, H, max_len, Dh) views
        self.values = [t.permute(0, 2, 1, 3) for t in self._v]
        self.max_len = max_len
        self._stored = 0

    @property
    def length(self):
        return self._stored

    def append(self, layer, k, v):
        start, end = self._stored, self._stored + k.size(2)
        if end > self.max_len:
            raise ValueError(f"KV cache full: {start} stored, {k.size(2)} more requested, room for {self.max_len}")
        self._k[layer][:, start:end] = k.transpose(1, 2)
        self._v[layer][:, start:end] = v.transpose(1, 2)
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        if self._stored + n > self.max_len:
            raise ValueError(f"KV cache full: {self._stored} stored, {n} more requested, room for {self.max_len}")
        self._stored += n

    def reorder(self, index):
        self._k = [t[index] for t in self._k]                          # (B_new, max_len, H, Dh)
        self._v = [t[index] for t in self._v]
        self.keys = [t.permute(0, 2, 1, 3) for t in self._k]
        self.values = [t.permute(0, 2, 1, 3) for t in self._v]


# --- cached_attention ------------------------------------------------------------------------


@alternative("cached_attention",
             "fused q/k/v: torch.cat of the weights and biases, F.linear once; mask from arange comparisons, always")
def fused_qkv(attn, x, cache, layer):
    weight = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight], dim=0)
    bias = None
    if attn.q_proj.bias is not None:
        bias = torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
    q, k, v = F.linear(x, weight, bias).chunk(3, dim=-1)
    q, k, v = (split_heads(t, attn.n_heads) for t in (q, k, v))
    query_pos = torch.arange(cache.length, cache.length + x.shape[1], device=x.device)
    keys, values = cache.append(layer, k, v)
    key_pos = torch.arange(keys.shape[2], device=x.device)
    mask = key_pos[None, :] <= query_pos[:, None]          # every step, even for one new token
    out, _ = scaled_dot_product_attention(q, keys, values, mask)
    return attn.o_proj(merge_heads(out))


@alternative("cached_attention", "own attention with an additive float mask (0 / -inf), always applied")
def additive_mask(attn, x, cache, layer):
    batch, new, _ = x.shape
    start = cache.length
    q = split_heads(attn.q_proj(x), attn.n_heads)
    keys, values = cache.append(layer, split_heads(attn.k_proj(x), attn.n_heads),
                                split_heads(attn.v_proj(x), attn.n_heads))
    total = start + new
    blocked = torch.ones(new, total, dtype=torch.bool, device=x.device).triu(diagonal=start + 1)
    bias = torch.zeros(new, total, dtype=q.dtype, device=x.device).masked_fill(blocked, float("-inf"))
    scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias
    weights = torch.softmax(scores, dim=-1)
    attn.last_attn_weights = weights
    return attn.o_proj(merge_heads(weights @ values))


# --- lm_make_cache / lm_forward --------------------------------------------------------------


@alternative("lm_make_cache",
             "sizes from q_proj.in_features and pos_emb.num_embeddings, dtype/device from parameters()")
def dims_from_modules(self, batch_size, max_len=None):
    limit = self.pos_emb.num_embeddings
    if max_len is None:
        max_len = limit
    elif max_len > limit:
        raise ValueError(f"a cache of {max_len} positions is longer than the model's max_len={limit}")
    first = self.blocks[0].attn
    d_model = first.q_proj.in_features
    parameter = next(self.parameters())
    return KVCache(n_layers=len(self.blocks), batch_size=batch_size, n_heads=first.n_heads,
                   d_head=d_model // first.n_heads, max_len=max_len, dtype=parameter.dtype, device=parameter.device)


@alternative("lm_forward",
             "uncached = cached through a throwaway cache of L positions; pos_emb.weight slices; no block.dropout")
def uncached_through_cache(self, ids, cache=None):
    if cache is None:
        cache = self.make_cache(ids.shape[0], max_len=ids.shape[1])     # ValueError past max_len
    start, new = cache.length, ids.shape[1]
    if start + new > min(cache.max_len, self.max_len):
        raise ValueError(f"{new} new tokens do not fit after {start} cached ones (max_len {cache.max_len})")
    x = self.tok_emb(ids) + self.pos_emb.weight[start:start + new]
    for i, block in enumerate(self.blocks):
        x = x + cached_attention(block.attn, block.norm1(x), cache, i)
        x = x + block.ff(block.norm2(x))
    cache.advance(new)
    return self.lm_head(self.norm_f(x))


@alternative("lm_forward", "separate prefill (several tokens) and decode (one token) paths; no block.dropout calls")
def prefill_and_decode_paths(self, ids, cache=None):
    batch, new = ids.shape
    if cache is None:
        if new > self.max_len:
            raise ValueError(f"sequence length {new} exceeds max_len={self.max_len}")
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(new, device=ids.device))
        mask = causal_mask(new, device=ids.device)
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.lm_head(self.norm_f(x))
    limit = min(self.max_len, cache.max_len)
    if cache.length + new > limit:
        raise ValueError(f"cache holds {cache.length} tokens, {new} new ones would exceed max_len={limit}")
    if new == 1:                                   # decode step
        position = torch.full((1,), cache.length, dtype=torch.long, device=ids.device)
        x = self.tok_emb(ids) + self.pos_emb(position)
    else:                                          # prefill (or a chunk)
        x = self.tok_emb(ids) + self.pos_emb(cache.length + torch.arange(new, device=ids.device))
    for layer, block in enumerate(self.blocks):
        h = block.norm1(x)
        x = x + cached_attention(block.attn, h, cache, layer)
        x = x + block.ff(block.norm2(x))
    cache.advance(new)
    return self.lm_head(self.norm_f(x))


# --- next_token_probs / sample_next_token ----------------------------------------------------


def _refuse(temperature, top_k, top_p, greedy_allowed):
    if temperature < 0 or (temperature == 0 and not greedy_allowed):
        raise ValueError(f"temperature={temperature} is not allowed here")
    if top_k is not None and top_k <= 0:
        raise ValueError(f"top_k={top_k}: keep at least one token")
    if top_p is not None and (top_p <= 0 or top_p > 1):
        raise ValueError(f"top_p={top_p} is outside (0, 1]")


@alternative("next_token_probs", "top-k by sorting: -inf at sorted ranks >= k, scattered back to vocabulary order; "
                                 "top-p in sorted order (cumsum minus own probability < top_p), scattered back")
def sort_and_scatter(logits, temperature=1.0, top_k=None, top_p=None):
    _refuse(temperature, top_k, top_p, greedy_allowed=False)
    scaled = logits / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
        sorted_logits[..., top_k:] = float("-inf")
        scaled = torch.empty_like(scaled).scatter_(-1, order, sorted_logits)
    probs = F.softmax(scaled, dim=-1)
    if top_p is not None:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        sorted_probs = torch.where(sorted_probs.cumsum(-1) - sorted_probs < top_p, sorted_probs,
                                   torch.zeros_like(sorted_probs))
        sorted_probs = sorted_probs / sorted_probs.sum(-1, keepdim=True)
        probs = torch.empty_like(probs).scatter_(-1, order, sorted_probs)
    return probs


@alternative("next_token_probs", "threshold with kthvalue, torch.where to -inf, float64 inside; top-p without sorting: "
                                 "a token is kept when the mass of the strictly more probable tokens is < top_p")
def kthvalue_where_float64(logits, temperature=1.0, top_k=None, top_p=None):
    _refuse(temperature, top_k, top_p, greedy_allowed=False)
    scaled = logits.double() / temperature
    vocab = scaled.shape[-1]
    if top_k is not None:
        k = min(top_k, vocab)
        threshold = scaled.kthvalue(vocab - k + 1, dim=-1, keepdim=True).values   # the k-th largest
        scaled = torch.where(scaled >= threshold, scaled, torch.full_like(scaled, float("-inf")))
    probs = torch.exp(scaled - scaled.max(dim=-1, keepdim=True).values)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    if top_p is not None:
        above = (probs[..., None, :] > probs[..., :, None]).to(probs.dtype)      # [b, i, j]: p_j > p_i
        mass_above = (above * probs[..., None, :]).sum(-1)
        probs = torch.where(mass_above < top_p, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs.to(logits.dtype)


@alternative("next_token_probs", "top-p as a probability threshold: searchsorted finds the crossing token in the "
                                 "sorted cumulative sums, every token at least that probable is kept")
def searchsorted_threshold(logits, temperature=1.0, top_k=None, top_p=None):
    _refuse(temperature, top_k, top_p, greedy_allowed=False)
    scaled = logits / temperature
    if top_k is not None:
        smallest_kept = scaled.topk(min(top_k, scaled.size(-1)), dim=-1).values.min(dim=-1, keepdim=True).values
        scaled = scaled.masked_fill(scaled < smallest_kept, -math.inf)
    probs = scaled.softmax(dim=-1)
    if top_p is None:
        return probs
    sorted_probs = probs.sort(dim=-1, descending=True).values
    cumulative = sorted_probs.cumsum(dim=-1).contiguous()
    target = torch.full_like(cumulative[..., :1], top_p)
    crossing = torch.searchsorted(cumulative, target).clamp(max=probs.size(-1) - 1)   # first cumsum >= top_p
    threshold = sorted_probs.gather(-1, crossing)
    kept = probs * (probs >= threshold)
    return kept / kept.sum(dim=-1, keepdim=True)


@alternative("sample_next_token", "greedy through topk(1); the draw from float64 probabilities",
             cpu_only="on a CUDA device torch.multinomial draws other random numbers for float64 probabilities "
                      "than for float32 ones, so the seeded tokens differ from the reference's; on the CPU, "
                      "where the tests create their tensors when grading, the draws are the same")
def float64_probs(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    _refuse(temperature, top_k, top_p, greedy_allowed=True)
    if temperature == 0:
        return torch.topk(logits, 1, dim=-1).indices[:, 0]
    probs = next_token_probs(logits.double(), temperature, top_k, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


# --- generate --------------------------------------------------------------------------------


@alternative("generate", "grows the output with torch.cat; logits computed at the top of each step")
def cat_growth(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None,
               generator=None):
    positions = model.pos_emb.num_embeddings
    if prompt_ids.size(1) + max_new_tokens > positions:
        raise ValueError(f"cannot write {max_new_tokens} tokens after a {prompt_ids.size(1)}-token prompt: "
                         f"the model has {positions} positions")
    ids = prompt_ids.to(next(model.parameters()).device)
    cache = model.make_cache(ids.shape[0], max_len=ids.shape[1] + max_new_tokens) if use_cache else None
    with torch.no_grad():
        for step in range(max_new_tokens):
            if use_cache:
                logits = model(ids if step == 0 else ids[:, -1:], cache=cache)
            else:
                logits = model(ids)
            token = sample_next_token(logits[:, -1, :], temperature, top_k, generator=generator, top_p=top_p)
            ids = torch.cat([ids, token.unsqueeze(1)], dim=1)
    return ids.to(prompt_ids.device)


@alternative("generate", "a while loop over a Python list of per-step token columns, under torch.inference_mode")
def while_loop_inference_mode(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                              top_p=None, generator=None):
    total = prompt_ids.shape[1] + max_new_tokens
    if total > model.max_len:
        raise ValueError(f"{total} tokens requested, the model's max_len is {model.max_len}")
    columns = [prompt_ids.to(next(model.parameters()).device)]
    with torch.inference_mode():
        cache = model.make_cache(prompt_ids.shape[0], max_len=prompt_ids.shape[1] + max_new_tokens) \
            if use_cache else None
        feed = columns[0]
        produced = 0
        while produced < max_new_tokens:
            if use_cache:
                logits = model(feed, cache=cache)[:, -1]
            else:
                logits = model(torch.cat(columns, dim=1))[:, -1]
            token = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator).view(-1, 1)
            columns.append(token)
            feed = token
            produced += 1
        return torch.cat(columns, dim=1).to(prompt_ids.device)


# --- more alternatives, written to look for tests that take points from correct work; the last
# ones in each file (extra dict keys, a tensor time, a float32 softmax, stacked cache tensors,
# one wasted forward) did lose points until the tests were relaxed ----------------------------


def _check_sampling_args(temperature, top_k, top_p):
    # another order than the reference: top_p, then top_k, then temperature
    if top_p is not None and not (top_p > 0 and top_p <= 1):
        raise ValueError(f"invalid top_p {top_p!r}: nucleus sampling needs 0 < top_p <= 1")
    if top_k is not None and top_k < 1:
        raise ValueError(f"invalid top_k {top_k!r}: at least one candidate token is needed")
    if temperature < 0:
        raise ValueError(f"invalid temperature {temperature!r}: must be non-negative")


@alternative("KVCache", "per layer ONE buffer (B, H, max_len, 2, Dh): keys/values are strided views [..., 0, :] and "
                        "[..., 1, :] of it (interleaved K and V); writes with narrow().copy_()")
class interleaved_kv:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self._kv = [torch.zeros(batch_size, n_heads, max_len, 2, d_head, dtype=dtype, device=device)
                    for _ in range(n_layers)]
        self.keys = [kv[..., 0, :] for kv in self._kv]
        self.values = [kv[..., 1, :] for kv in self._kv]
        self.max_len = max_len
        self.length = 0

    def _room(self, new):
        if self.length + new > self.max_len:
            raise ValueError(f"no room in the KV cache: {self.length} stored, {new} new, max_len {self.max_len}")

    def append(self, layer, k, v):
        new = k.size(2)
        self._room(new)
        self.keys[layer].narrow(2, self.length, new).copy_(k)
        self.values[layer].narrow(2, self.length, new).copy_(v)
        end = self.length + new
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, n):
        self._room(n)
        self.length += n

    def reorder(self, index):
        self._kv = [kv.index_select(0, index) for kv in self._kv]      # K and V move together
        self.keys = [kv[..., 0, :] for kv in self._kv]
        self.values = [kv[..., 1, :] for kv in self._kv]


@alternative("KVCache", "index_copy_ at torch.arange(length, length + L) positions; overflow checked by a helper "
                        "whose message gives the free room and max_len")
class index_copy_cache:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.keys, self.values = [], []
        for _ in range(n_layers):
            self.keys.append(torch.zeros(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device))
            self.values.append(torch.zeros(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device))
        self.max_len = max_len
        self.length = 0

    def _fits(self, n):
        free = self.max_len - self.length
        if n > free:
            raise ValueError(f"KV cache overflow: {n} new positions but only {free} free "
                             f"({self.length} of max_len={self.max_len} used)")

    def append(self, layer, k, v):
        n = k.shape[-2]
        self._fits(n)
        positions = torch.arange(self.length, self.length + n, device=self.keys[layer].device)
        self.keys[layer].index_copy_(2, positions, k.to(self.keys[layer].dtype))
        self.values[layer].index_copy_(2, positions, v.to(self.values[layer].dtype))
        end = self.length + n
        return self.keys[layer].narrow(2, 0, end), self.values[layer].narrow(2, 0, end)

    def advance(self, n):
        self._fits(n)
        self.length += n

    def reorder(self, index):
        # index_copy_ of the gathered rows into fresh buffers of B_new rows
        for store in (self.keys, self.values):
            for layer, old in enumerate(store):
                new = torch.zeros((index.shape[0],) + tuple(old.shape[1:]), dtype=old.dtype, device=old.device)
                store[layer] = new.index_copy_(0, torch.arange(index.shape[0], device=old.device),
                                               old.index_select(0, index))


@alternative("cached_attention", "F.linear with the modules' weights; the mask is rows length..length+L-1 of the "
                                 "provided causal_mask(length + L), passed at every step")
def causal_rows(attn, x, cache, layer):
    heads = attn.n_heads
    q = split_heads(F.linear(x, attn.q_proj.weight, attn.q_proj.bias), heads)
    k = split_heads(F.linear(x, attn.k_proj.weight, attn.k_proj.bias), heads)
    v = split_heads(F.linear(x, attn.v_proj.weight, attn.v_proj.bias), heads)
    start = cache.length
    keys, values = cache.append(layer, k, v)
    mask = causal_mask(start + x.shape[1], device=x.device)[start:]
    out, weights = scaled_dot_product_attention(q, keys, values, mask=mask)
    attn.last_attn_weights = weights
    return attn.o_proj(merge_heads(out))


@alternative("cached_attention", "own attention written with einsum (dispatches to bmm), heads reshaped by hand; "
                                 "mask only for several new tokens")
def einsum_attention(attn, x, cache, layer):
    batch, new, d_model = x.shape
    heads = attn.n_heads
    d_head = d_model // heads

    def to_heads(t):
        return t.reshape(batch, new, heads, d_head).permute(0, 2, 1, 3)

    q, k, v = to_heads(attn.q_proj(x)), to_heads(attn.k_proj(x)), to_heads(attn.v_proj(x))
    start = cache.length
    keys, values = cache.append(layer, k, v)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(d_head)
    if new > 1:
        query_pos = torch.arange(start, start + new, device=x.device).unsqueeze(1)
        key_pos = torch.arange(start + new, device=x.device).unsqueeze(0)
        scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
    weights = scores.softmax(dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", weights, values)
    return attn.o_proj(out.permute(0, 2, 1, 3).reshape(batch, new, d_model))


@alternative("lm_make_cache",
             "`max_len or self.max_len`; head size from q_proj.out_features; dtype/device from tok_emb")
def make_cache_from_embeddings(self, batch_size, max_len=None):
    max_len = max_len or self.max_len
    if max_len > self.max_len:
        raise ValueError(f"the model has only {self.max_len} positions, a cache of {max_len} was asked for")
    attn = self.blocks[0].attn
    emb = self.tok_emb.weight
    return KVCache(n_layers=len(self.blocks), batch_size=batch_size, n_heads=attn.n_heads,
                   d_head=attn.q_proj.out_features // attn.n_heads, max_len=max_len,
                   dtype=emb.dtype, device=emb.device)


@alternative("lm_forward", "checks only the model's max_len itself and leaves the cache's own overflow to "
                           "KVCache.append's ValueError; positions start + arange")
def forward_cache_raises(self, ids, cache=None):
    batch, new = ids.shape
    start = cache.length if cache is not None else 0
    if start + new > self.max_len:
        raise ValueError(f"positions {start}..{start + new - 1} do not exist: max_len={self.max_len}")
    x = self.tok_emb(ids) + self.pos_emb(start + torch.arange(new, device=ids.device))
    if cache is None:
        mask = causal_mask(new, device=ids.device)
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.norm_f(x))
    for layer, block in enumerate(self.blocks):
        x = x + block.dropout(cached_attention(block.attn, block.norm1(x), cache, layer))
        x = x + block.dropout(block.ff(block.norm2(x)))
    cache.advance(new)
    return self.lm_head(self.norm_f(x))


@alternative("next_token_probs", "top-k with topk + scatter into a -inf tensor; top-p the Hugging Face way: sort "
                                 "ascending, drop tokens whose ascending cumsum <= 1 - top_p, keep the largest")
def hf_style(logits, temperature=1.0, top_k=None, top_p=None):
    _check_sampling_args(temperature, top_k, top_p)
    if temperature == 0:
        raise ValueError("temperature 0 has no distribution (greedy is sample_next_token's job)")
    scaled = logits / temperature
    if top_k is not None:
        values, indices = torch.topk(scaled, min(top_k, scaled.size(-1)), dim=-1)
        scaled = torch.full_like(scaled, float("-inf")).scatter(-1, indices, values)
    probs = F.softmax(scaled, dim=-1)
    if top_p is not None:
        ascending, order = torch.sort(probs, dim=-1, descending=False)
        remove = ascending.cumsum(dim=-1) <= 1 - top_p
        remove[..., -1:] = False                                   # the most probable token stays
        probs = probs.masked_fill(remove.scatter(-1, order, remove), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@alternative("next_token_probs", "top-k by a boolean scatter mask of topk's indices; top-p row by row in Python: "
                                 "walk argsort(descending), stop once the running total reaches top_p")
def python_loop_top_p(logits, temperature=1.0, top_k=None, top_p=None):
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 here, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and (top_p <= 0 or top_p > 1):
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    scaled = logits / temperature
    if top_k is not None:
        keep = torch.zeros_like(scaled, dtype=torch.bool)
        keep.scatter_(-1, scaled.topk(min(top_k, scaled.shape[-1]), dim=-1).indices, True)
        scaled = scaled.masked_fill(~keep, float("-inf"))
    probs = scaled.softmax(dim=-1)
    if top_p is None:
        return probs
    rows = []
    for row in probs:
        kept = torch.zeros_like(row)
        total = 0.0
        for index in torch.argsort(row, descending=True).tolist():
            kept[index] = row[index]
            total += row[index].item()
            if total >= top_p:
                break
        rows.append(kept / kept.sum())
    return torch.stack(rows)


@alternative("sample_next_token", "arguments checked top_p/top_k/temperature order; greedy via max().indices; "
                                  "multinomial with replacement=True (one sample: the same draw), .view(-1)")
def replacement_true(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    _check_sampling_args(temperature, top_k, top_p)
    if temperature == 0:
        return logits.max(dim=-1).indices
    probs = next_token_probs(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, num_samples=1, replacement=True, generator=generator).view(-1)


@alternative("generate", "prefill all but the LAST prompt token; every loop step feeds one token (the first one "
                         "the last prompt token), so each step is 'feed, take logits, sample'")
def prefill_all_but_last(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                         top_p=None, generator=None):
    batch, prompt_len = prompt_ids.shape
    total = prompt_len + max_new_tokens
    if total > model.max_len:
        raise ValueError(f"{prompt_len} + {max_new_tokens} tokens exceed max_len={model.max_len}")
    device = model.lm_head.weight.device
    out = torch.zeros(batch, total, dtype=torch.long, device=device)
    out[:, :prompt_len] = prompt_ids.to(device)
    with torch.no_grad():
        cache = model.make_cache(batch, max_len=total) if use_cache else None
        if use_cache and prompt_len > 1:
            model(out[:, :prompt_len - 1], cache=cache)
        for position in range(prompt_len, total):
            if use_cache:
                logits = model(out[:, position - 1:position], cache=cache)
            else:
                logits = model(out[:, :position])
            out[:, position] = sample_next_token(logits[:, -1, :], temperature, top_k, top_p=top_p,
                                                 generator=generator)
    return out.to(prompt_ids.device)


@alternative("KVCache", "keys/values are two stacked tensors (n_layers, B, H, "
                        "max_len, Dh); keys[layer] indexes a layer like a list would")
class stacked_tensors:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        shape = (n_layers, batch_size, n_heads, max_len, d_head)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.max_len, self.length = max_len, 0

    def append(self, layer, k, v):
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} stored + {k.shape[2]} new > max_len={self.max_len}")
        self.keys[layer, :, :, self.length:end] = k
        self.values[layer, :, :, self.length:end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, n):
        if self.length + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.length} stored + {n} new > max_len={self.max_len}")
        self.length += n

    def reorder(self, index):
        self.keys = self.keys[:, index]                                 # (n_layers, B_new, H, max_len, Dh)
        self.values = self.values[:, index]


@alternative("next_token_probs", "softmax computed and returned in float32 whatever the logits' dtype "
                                 "(F.softmax(..., dtype=torch.float32)); the task does not state the output dtype")
def always_float32(logits, temperature=1.0, top_k=None, top_p=None):
    _check_sampling_args(temperature, top_k, top_p)
    if temperature == 0:
        raise ValueError("temperature must be > 0 for a distribution")
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, min(top_k, scaled.shape[-1]), dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = F.softmax(scaled, dim=-1, dtype=torch.float32)
    if top_p is not None:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < top_p
        probs = probs * torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


@alternative("generate", "wasted work, same tokens: after appending each token the loop always runs "
                         "the model again (cache: the new token; no cache: the whole sequence), also after the "
                         "last one")
def trailing_forward(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None,
                     generator=None):
    if prompt_ids.shape[1] + max_new_tokens > model.max_len:
        raise ValueError(f"prompt {prompt_ids.shape[1]} + {max_new_tokens} new tokens > max_len {model.max_len}")
    ids = prompt_ids.to(next(model.parameters()).device)
    with torch.no_grad():
        if use_cache:
            cache = model.make_cache(ids.shape[0], max_len=ids.shape[1] + max_new_tokens)
            logits = model(ids, cache=cache)[:, -1]
        else:
            logits = model(ids)[:, -1]
        for _ in range(max_new_tokens):
            token = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)
            ids = torch.cat([ids, token[:, None]], dim=1)
            logits = model(token[:, None], cache=cache)[:, -1] if use_cache else model(ids)[:, -1]
    return ids.to(prompt_ids.device)


# --- alternatives in the styles of well-known projects: their structure, written here from the task ----------


def _upcast(t):
    # the softmax of the styles below runs in at least float32 (their upcast of half precision), never lower
    return torch.promote_types(t.dtype, torch.float32)


class _StaticLayerCache(torch.nn.Module):
    """One layer's preallocated keys and values as registered buffers (B, H, max_len, Dh), written with
    index_copy_ at the positions given as a tensor; update returns the whole buffers."""

    def __init__(self, batch_size, n_heads, max_len, d_head, dtype, device):
        super().__init__()
        shape = (batch_size, n_heads, max_len, d_head)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype, device=device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype, device=device))

    def update(self, input_pos, k_val, v_val):
        self.k_cache.index_copy_(2, input_pos, k_val)
        self.v_cache.index_copy_(2, input_pos, v_val)
        return self.k_cache, self.v_cache


def _nucleus(probs, top_p):
    # the task's top-p: most probable first, keep up to and including the first whose cumulative sum reaches top_p
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs < top_p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    probs = probs.masked_fill(~keep, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


class _TemperatureLogitsWarper:
    def __init__(self, temperature):
        if not temperature > 0:
            raise ValueError(f"`temperature` has to be a strictly positive float, but is {temperature}")
        self.temperature = temperature

    def __call__(self, scores):
        return scores / self.temperature


class _TopKLogitsWarper:
    def __init__(self, top_k, filter_value=float("-inf"), min_tokens_to_keep=1):
        if not isinstance(top_k, int) or top_k <= 0:
            raise ValueError(f"`top_k` has to be a strictly positive integer, but is {top_k}")
        self.top_k, self.filter_value = max(top_k, min_tokens_to_keep), filter_value

    def __call__(self, scores):
        top_k = min(self.top_k, scores.size(-1))
        indices_to_remove = scores < torch.topk(scores, top_k)[0][..., -1, None]
        return scores.masked_fill(indices_to_remove, self.filter_value)


class _TopPLogitsWarper:
    def __init__(self, top_p, filter_value=float("-inf"), min_tokens_to_keep=1):
        top_p = float(top_p)
        if not 0 < top_p <= 1:
            raise ValueError(f"`top_p` has to be a float > 0 and <= 1, but is {top_p}")
        self.top_p, self.filter_value, self.min_tokens_to_keep = top_p, filter_value, min_tokens_to_keep

    def __call__(self, scores):
        sorted_logits, sorted_indices = torch.sort(scores, descending=False)
        cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # drop the least probable tokens while their total stays within 1 - top_p: what is left is the
        # most probable tokens up to and including the first whose cumulative probability reaches top_p
        sorted_indices_to_remove = cumulative_probs <= (1 - self.top_p)
        sorted_indices_to_remove[..., -self.min_tokens_to_keep:] = False
        indices_to_remove = sorted_indices_to_remove.scatter(-1, sorted_indices, sorted_indices_to_remove)
        return scores.masked_fill(indices_to_remove, self.filter_value)


@alternative("KVCache", "Hugging Face's Cache API: per-layer lists key_cache/value_cache (keys/values are the same "
                        "lists), update(key_states, value_states, layer_idx) returns the layer's keys and values so "
                        "far, get_seq_length(), cache[layer] -> (keys, values); preallocated, since the task forbids "
                        "a DynamicCache's torch.cat growth")
class hf_cache_update:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.max_cache_len = max_len
        self._seen_tokens = 0
        self.key_cache, self.value_cache = [], []
        for _ in range(n_layers):
            self.key_cache.append(torch.zeros(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device))
            self.value_cache.append(torch.zeros(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device))

    keys = property(lambda self: self.key_cache)
    values = property(lambda self: self.value_cache)
    max_len = property(lambda self: self.max_cache_len)

    @property
    def length(self):
        return self._seen_tokens

    @length.setter
    def length(self, value):
        self._seen_tokens = value

    def __len__(self):
        return len(self.key_cache)

    def __getitem__(self, layer_idx):
        end = self._seen_tokens
        return self.key_cache[layer_idx][:, :, :end], self.value_cache[layer_idx][:, :, :end]

    def get_seq_length(self, layer_idx=0):
        return self._seen_tokens

    def _room_for(self, new):
        if self._seen_tokens + new > self.max_cache_len:
            raise ValueError(f"the cache holds {self._seen_tokens} tokens and cannot take {new} more: "
                             f"max_cache_len={self.max_cache_len}")

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        new = key_states.shape[-2]
        self._room_for(new)
        start, end = self._seen_tokens, self._seen_tokens + new
        self.key_cache[layer_idx][:, :, start:end] = key_states
        self.value_cache[layer_idx][:, :, start:end] = value_states
        return self.key_cache[layer_idx][:, :, :end], self.value_cache[layer_idx][:, :, :end]

    def append(self, layer, k, v):
        return self.update(k, v, layer)

    def advance(self, n):
        self._room_for(n)
        self._seen_tokens += n

    def reorder_cache(self, beam_idx):
        for layer_idx in range(len(self.key_cache)):
            device = self.key_cache[layer_idx].device
            self.key_cache[layer_idx] = self.key_cache[layer_idx].index_select(0, beam_idx.to(device))
            device = self.value_cache[layer_idx].device
            self.value_cache[layer_idx] = self.value_cache[layer_idx].index_select(0, beam_idx.to(device))

    def reorder(self, index):
        self.reorder_cache(index)


@alternative("KVCache", "llama's reference layout: cache_k/cache_v per layer of shape (B, max_len, H, Dh), sequence "
                        "before heads, written with [:bsz, start_pos:start_pos + seqlen] = xk (xk as (B, L, H, Dh)); "
                        "keys/values are transposed views; a smaller batch than allocated may be appended")
class llama_seq_first_cache:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.max_batch_size, self.max_seq_len = batch_size, max_len
        self.cache_k = [torch.zeros((batch_size, max_len, n_heads, d_head), dtype=dtype, device=device)
                        for _ in range(n_layers)]
        self.cache_v = [torch.zeros((batch_size, max_len, n_heads, d_head), dtype=dtype, device=device)
                        for _ in range(n_layers)]
        self.keys = [cache.transpose(1, 2) for cache in self.cache_k]
        self.values = [cache.transpose(1, 2) for cache in self.cache_v]
        self.max_len = max_len
        self.length = 0

    def append(self, layer, k, v):
        bsz, seqlen, start_pos = k.shape[0], k.shape[2], self.length
        if start_pos + seqlen > self.max_seq_len:
            raise ValueError(f"start_pos {start_pos} + seqlen {seqlen} exceeds max_seq_len {self.max_seq_len}")
        xk, xv = k.transpose(1, 2), v.transpose(1, 2)                    # (bsz, seqlen, H, Dh)
        self.cache_k[layer][:bsz, start_pos:start_pos + seqlen] = xk
        self.cache_v[layer][:bsz, start_pos:start_pos + seqlen] = xv
        keys = self.cache_k[layer][:bsz, :start_pos + seqlen]
        values = self.cache_v[layer][:bsz, :start_pos + seqlen]
        return keys.transpose(1, 2), values.transpose(1, 2)

    def advance(self, n):
        if self.length + n > self.max_seq_len:
            raise ValueError(f"start_pos {self.length} + {n} exceeds max_seq_len {self.max_seq_len}")
        self.length += n

    def reorder(self, index):
        self.cache_k = [cache[index] for cache in self.cache_k]         # (B_new, max_len, H, Dh)
        self.cache_v = [cache[index] for cache in self.cache_v]
        self.max_batch_size = index.shape[0]
        self.keys = [cache.transpose(1, 2) for cache in self.cache_k]
        self.values = [cache.transpose(1, 2) for cache in self.cache_v]


@alternative("KVCache", "gpt-fast's static cache: an nn.ModuleList of per-layer modules holding k_cache/v_cache "
                        "buffers (B, H, max_len, Dh); update(input_pos, k, v) index_copy_s at a tensor of positions "
                        "and returns the whole buffers, append narrows them to the stored positions")
class gpt_fast_index_copy:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.layers = torch.nn.ModuleList(
            [_StaticLayerCache(batch_size, n_heads, max_len, d_head, dtype, device) for _ in range(n_layers)])
        self.max_len = max_len
        self.length = 0

    @property
    def keys(self):
        return [layer.k_cache for layer in self.layers]

    @property
    def values(self):
        return [layer.v_cache for layer in self.layers]

    def _check(self, new):
        if self.length + new > self.max_len:
            raise ValueError(f"{self.length} positions stored, {new} new: more than max_len={self.max_len}")

    def append(self, layer, k, v):
        new = k.shape[2]
        self._check(new)
        input_pos = torch.arange(self.length, self.length + new, device=self.layers[layer].k_cache.device)
        k_out, v_out = self.layers[layer].update(input_pos, k, v)
        return k_out[:, :, :self.length + new], v_out[:, :, :self.length + new]

    def advance(self, n):
        self._check(n)
        self.length += n

    def reorder(self, index):
        for layer in self.layers:
            layer.k_cache = layer.k_cache.index_select(0, index)       # a registered buffer, reassigned
            layer.v_cache = layer.v_cache.index_select(0, index)


@alternative("cached_attention", "llama's attention: q/k/v viewed (bsz, seqlen, H, Dh), the mask for seqlen > 1 "
                                 "an additive triu(-inf) block hstacked after zeros for the start_pos cached keys, "
                                 "torch.matmul scores, softmax upcast then type_as(xq)")
def llama_hstack_mask(attn, x, cache, layer):
    bsz, seqlen, dim = x.shape
    n_heads = attn.n_heads
    head_dim = dim // n_heads
    start_pos = cache.length
    xq = attn.q_proj(x).view(bsz, seqlen, n_heads, head_dim)
    xk = attn.k_proj(x).view(bsz, seqlen, n_heads, head_dim)
    xv = attn.v_proj(x).view(bsz, seqlen, n_heads, head_dim)
    keys, values = cache.append(layer, xk.transpose(1, 2), xv.transpose(1, 2))
    mask = None
    if seqlen > 1:
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        mask = torch.hstack([torch.zeros((seqlen, start_pos), device=x.device), mask]).type_as(xq)
    xq = xq.transpose(1, 2)                                                   # (bsz, H, seqlen, Dh)
    scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(head_dim)
    if mask is not None:
        scores = scores + mask                                                # (seqlen, start_pos + seqlen)
    scores = F.softmax(scores.to(_upcast(scores)), dim=-1).type_as(xq)
    output = torch.matmul(scores, values)
    output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
    return attn.o_proj(output)


@alternative("cached_attention", "Hugging Face's eager attention: hidden_shape views, cache update, scores scaled by "
                                 "head_dim ** -0.5, an additive mask of finfo.min above the cache positions (always "
                                 "added), softmax in float32 at least, attn_weights kept")
def hf_eager_attention(attn, x, cache, layer):
    bsz, q_len, _ = x.size()
    head_dim = attn.q_proj.out_features // attn.n_heads
    hidden_shape = (bsz, q_len, -1, head_dim)
    query_states = attn.q_proj(x).view(hidden_shape).transpose(1, 2)
    key_states = attn.k_proj(x).view(hidden_shape).transpose(1, 2)
    value_states = attn.v_proj(x).view(hidden_shape).transpose(1, 2)
    cache_position = torch.arange(cache.length, cache.length + q_len, device=x.device)
    key_states, value_states = cache.append(layer, key_states, value_states)
    target_length = key_states.shape[-2]
    min_dtype = torch.finfo(query_states.dtype).min
    causal_mask = torch.full((q_len, target_length), min_dtype, dtype=query_states.dtype, device=x.device)
    causal_mask = causal_mask * (torch.arange(target_length, device=x.device) > cache_position.reshape(-1, 1))
    attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * head_dim ** -0.5
    attn_weights = attn_weights + causal_mask[None, None]
    attn_weights = F.softmax(attn_weights, dim=-1, dtype=_upcast(attn_weights)).to(query_states.dtype)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
    attn.last_attn_weights = attn_weights
    return attn.o_proj(attn_output)


@alternative("next_token_probs", "Hugging Face's logits warpers: a list of temperature, top-k and top-p processors, "
                                 "each mapping scores to scores (-inf filter value); top-p sorts the logits ascending "
                                 "and removes tokens whose cumulative probability is <= 1 - top_p, keeping the "
                                 "largest; one softmax at the end renormalises")
def hf_logits_warpers(logits, temperature=1.0, top_k=None, top_p=None):
    warpers = [_TemperatureLogitsWarper(temperature)]
    if top_k is not None:
        warpers.append(_TopKLogitsWarper(top_k))
    if top_p is not None:
        warpers.append(_TopPLogitsWarper(top_p))
    scores = logits
    for warper in warpers:
        scores = warper(scores)
    return F.softmax(scores, dim=-1)


@alternative("sample_next_token", "nanoGPT's sampling: logits / temperature, then v, _ = torch.topk(...) and "
                                  "logits[logits < v[:, [-1]]] = -inf in place, F.softmax, top-p on those "
                                  "probabilities, torch.multinomial(probs, num_samples=1) over the full vocabulary")
def nanogpt_topk_sampling(logits, temperature=0.0, top_k=None, top_p=None, generator=None):
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    logits = logits / temperature                       # a new tensor: the caller's logits are not touched
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
    probs = F.softmax(logits, dim=-1)
    if top_p is not None:
        probs = _nucleus(probs, top_p)
    idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
    return idx_next[:, 0]


@alternative("generate", "nanoGPT's generate loop: for each new token run the model, logits[:, -1, :], sample, "
                         "idx = torch.cat((idx, idx_next), dim=1); with the cache the model sees the whole prompt "
                         "first and idx[:, -1:] afterwards")
def nanogpt_generate(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None, top_p=None,
                     generator=None):
    block_size = model.max_len
    if prompt_ids.size(1) + max_new_tokens > block_size:
        raise ValueError(f"cannot generate {max_new_tokens} tokens after {prompt_ids.size(1)}: "
                         f"block size is only {block_size}")
    idx = prompt_ids.to(next(model.parameters()).device)
    with torch.no_grad():
        cache = model.make_cache(idx.size(0), max_len=idx.size(1) + max_new_tokens) if use_cache else None
        for _ in range(max_new_tokens):
            if use_cache:
                idx_cond = idx if cache.length == 0 else idx[:, -1:]
                logits = model(idx_cond, cache=cache)
            else:
                logits = model(idx)
            logits = logits[:, -1, :]
            idx_next = sample_next_token(logits, temperature, top_k, top_p=top_p, generator=generator)[:, None]
            idx = torch.cat((idx, idx_next), dim=1)
    return idx.to(prompt_ids.device)


@alternative("generate", "gpt-fast's structure: seq = torch.empty(B, T + new) holding the prompt, prefill() gives "
                         "the first token, decode_n_tokens() collects the others in a list (cloned), "
                         "seq[:, T + 1:] = torch.cat(new_tokens)")
def gpt_fast_prefill_decode(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                            top_p=None, generator=None):
    B, T = prompt_ids.shape
    T_new = T + max_new_tokens
    if T_new > model.max_len:
        raise ValueError(f"T + max_new_tokens = {T_new} > max_seq_length {model.max_len}")
    device = model.tok_emb.weight.device
    seq = torch.empty(B, T_new, dtype=torch.long, device=device)
    seq[:, :T] = prompt_ids.to(device)
    if max_new_tokens == 0:
        return seq.to(prompt_ids.device)

    def sample(logits):
        return sample_next_token(logits[:, -1], temperature, top_k, top_p=top_p, generator=generator)

    with torch.no_grad():
        cache = model.make_cache(B, max_len=T_new) if use_cache else None

        def prefill(x):
            return sample(model(x, cache=cache) if use_cache else model(x))

        def decode_n_tokens(cur_token, num_new_tokens):
            new_tokens = []
            for _ in range(num_new_tokens):
                if use_cache:
                    logits = model(cur_token, cache=cache)
                else:
                    logits = model(torch.cat([seq[:, :T + 1], *new_tokens], dim=1))
                next_token = sample(logits)[:, None]
                new_tokens.append(next_token.clone())
                cur_token = next_token
            return new_tokens

        seq[:, T] = prefill(seq[:, :T])
        generated = decode_n_tokens(seq[:, T:T + 1], max_new_tokens - 1)
        if generated:
            seq[:, T + 1:] = torch.cat(generated, dim=-1)
    return seq.to(prompt_ids.device)


# --- beam_search -----------------------------------------------------------------------------


def _check_beam_request(model, prompt_ids, max_new_tokens, num_beams):
    if num_beams < 1:
        raise ValueError(f"num_beams={num_beams}: beam search needs at least one beam")
    if prompt_ids.shape[1] + max_new_tokens > model.max_len:
        raise ValueError(f"{prompt_ids.shape[1]} prompt tokens + {max_new_tokens} new ones exceed "
                         f"max_len={model.max_len}")


@alternative("beam_search", "torch.topk finds each prompt's num_beams-th best score; every candidate at least that "
                            "good is kept and a stable sort orders them (topk alone promises no order among ties); "
                            "the prompt is expanded to B * num_beams rows before the prefill, so reorder only follows "
                            "the beams")
def topk_threshold(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    _check_beam_request(model, prompt_ids, max_new_tokens, num_beams)
    batch, prompt_len = prompt_ids.shape
    device = model.lm_head.weight.device
    seqs = prompt_ids.to(device).repeat_interleave(num_beams, dim=0)
    if max_new_tokens == 0:
        return prompt_ids.clone()
    with torch.no_grad():
        cache = model.make_cache(batch * num_beams, max_len=prompt_len + max_new_tokens) if use_cache else None
        logits = model(seqs, cache=cache)[:, -1] if use_cache else model(seqs)[:, -1]
        scores = torch.zeros(batch, num_beams, device=device)
        scores[:, 1:] = float("-inf")
        for step in range(max_new_tokens):
            flat = (scores.unsqueeze(-1) + F.log_softmax(logits.float(), dim=-1).view(batch, num_beams, -1))
            flat = flat.view(batch, -1)
            vocab = flat.shape[-1] // num_beams
            kth = torch.topk(flat, num_beams, dim=-1).values[:, -1:]
            at_least = torch.where(flat >= kth, flat, torch.full_like(flat, float("-inf")))
            chosen = torch.sort(at_least, dim=-1, descending=True, stable=True).indices[:, :num_beams]
            scores = flat.gather(1, chosen)
            rows = (chosen // vocab + num_beams * torch.arange(batch, device=device).unsqueeze(1)).flatten()
            seqs = torch.cat([seqs[rows], (chosen % vocab).reshape(-1, 1)], dim=1)
            if step + 1 < max_new_tokens:
                if use_cache:
                    cache.reorder(rows)
                    logits = model(seqs[:, -1:], cache=cache)[:, -1]
                else:
                    logits = model(seqs)[:, -1]
    return seqs[::num_beams].to(prompt_ids.device)


@alternative("beam_search", "log-probabilities accumulated in float64; survivors by argsort of the negated scores "
                            "(ascending, stable); a Python loop over the prompts' beams for the parent rows")
def float64_scores(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    _check_beam_request(model, prompt_ids, max_new_tokens, num_beams)
    batch, prompt_len = prompt_ids.shape
    device = next(model.parameters()).device
    prompt = prompt_ids.to(device)
    rows = torch.tensor([p for p in range(batch) for _ in range(num_beams)], device=device)
    seqs = prompt[rows]
    with torch.no_grad():
        if use_cache and max_new_tokens > 0:
            cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens)
            logits = model(prompt, cache=cache)[:, -1].index_select(0, rows)
            cache.reorder(rows)
        elif max_new_tokens > 0:
            logits = model(seqs)[:, -1]
        total = torch.tensor([[0.0] + [-math.inf] * (num_beams - 1)] * batch, dtype=torch.float64, device=device)
        for step in range(max_new_tokens):
            step_scores = torch.log_softmax(logits.double(), dim=-1)
            vocab = step_scores.shape[1]
            candidates = (total.view(-1, 1) + step_scores).view(batch, num_beams * vocab)
            best = torch.argsort(-candidates, dim=1, stable=True)[:, :num_beams]
            total = torch.gather(candidates, 1, best)
            parents = [p * num_beams + int(b) // vocab for p in range(batch) for b in best[p]]
            rows = torch.tensor(parents, dtype=torch.long, device=device)
            seqs = torch.cat([seqs[rows], (best % vocab).view(-1, 1)], dim=1)
            if step == max_new_tokens - 1:
                break
            if use_cache:
                cache.reorder(rows)
                logits = model(seqs[:, -1:], cache=cache)[:, -1]
            else:
                logits = model(seqs)[:, -1]
    return seqs[torch.arange(batch, device=device) * num_beams].to(prompt_ids.device)


class _BeamSearchScorer:
    """Hugging Face's beam scorer, reduced to what the task asks (no end-of-sequence token, no length penalty):
    process() picks the next beams from the (B, num_beams * vocab) scores, finalize() the best sequence."""

    def __init__(self, batch_size, num_beams):
        self.batch_size, self.num_beams = batch_size, num_beams

    def process(self, next_token_scores, vocab_size):
        # a stable descending sort where Hugging Face takes torch.topk(2 * num_beams): the task fixes the ties
        next_indices = torch.sort(next_token_scores, dim=1, descending=True, stable=True).indices[:, :self.num_beams]
        next_beam_scores = next_token_scores.gather(1, next_indices)
        next_beam_tokens = next_indices % vocab_size
        batch_offset = torch.arange(self.batch_size, device=next_indices.device).unsqueeze(1) * self.num_beams
        next_beam_indices = next_indices // vocab_size + batch_offset
        return {"next_beam_scores": next_beam_scores.view(-1), "next_beam_tokens": next_beam_tokens.view(-1),
                "next_beam_indices": next_beam_indices.view(-1)}

    def finalize(self, input_ids):
        return input_ids.view(self.batch_size, self.num_beams, -1)[:, 0]


@alternative("beam_search", "Hugging Face's structure: input_ids expanded with repeat_interleave, beam_scores of "
                            "-1e9 for all but the first beam, a beam scorer's process()/finalize(), "
                            "cache.reorder(beam_idx) as its _reorder_cache, input_ids[beam_idx] grown with torch.cat")
def hf_beam_scorer(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    _check_beam_request(model, prompt_ids, max_new_tokens, num_beams)
    batch_size, cur_len = prompt_ids.shape
    max_length = cur_len + max_new_tokens
    input_ids = prompt_ids.to(model.lm_head.weight.device).repeat_interleave(num_beams, dim=0)   # expand
    beam_scorer = _BeamSearchScorer(batch_size, num_beams)
    beam_scores = torch.zeros((batch_size, num_beams), dtype=torch.float, device=input_ids.device)
    beam_scores[:, 1:] = -1e9
    beam_scores = beam_scores.view((batch_size * num_beams,))
    past_key_values = model.make_cache(batch_size * num_beams, max_len=max_length) if use_cache else None
    with torch.no_grad():
        while input_ids.shape[-1] < max_length:
            if past_key_values is None:
                outputs = model(input_ids)
            else:
                fresh = past_key_values.length == 0
                outputs = model(input_ids if fresh else input_ids[:, -1:], cache=past_key_values)
            next_token_logits = outputs[:, -1, :].float()
            next_token_scores = F.log_softmax(next_token_logits, dim=-1)
            next_token_scores = next_token_scores + beam_scores[:, None].expand_as(next_token_scores)
            vocab_size = next_token_scores.shape[-1]
            next_token_scores = next_token_scores.view(batch_size, num_beams * vocab_size)
            beam_outputs = beam_scorer.process(next_token_scores, vocab_size)
            beam_scores = beam_outputs["next_beam_scores"]
            beam_next_tokens = beam_outputs["next_beam_tokens"]
            beam_idx = beam_outputs["next_beam_indices"]
            input_ids = torch.cat([input_ids[beam_idx, :], beam_next_tokens.unsqueeze(-1)], dim=-1)
            if past_key_values is not None and input_ids.shape[-1] < max_length:
                past_key_values.reorder(beam_idx)
    return beam_scorer.finalize(input_ids).to(prompt_ids.device)


@alternative("beam_search", "plain Python: each prompt's candidates sorted with key (-score, beam * vocab + token) "
                            "from .tolist() log-probabilities, scores kept as Python floats; the cache reordered with "
                            "a list of parent rows")
def python_sorted_candidates(model, prompt_ids, max_new_tokens, num_beams, use_cache=True):
    _check_beam_request(model, prompt_ids, max_new_tokens, num_beams)
    batch, prompt_len = prompt_ids.shape
    device = next(model.parameters()).device
    prompt = prompt_ids.to(device)
    beams = [[(0.0 if b == 0 else -math.inf, prompt[p].tolist()) for b in range(num_beams)] for p in range(batch)]
    expand = torch.tensor([p for p in range(batch) for _ in range(num_beams)], device=device)
    with torch.no_grad():
        cache = None
        if use_cache and max_new_tokens > 0:
            cache = model.make_cache(batch, max_len=prompt_len + max_new_tokens)
            logits = model(prompt, cache=cache)[:, -1][expand]
            cache.reorder(expand)
        for step in range(max_new_tokens):
            if cache is None:
                ids = torch.tensor([seq for prompt_beams in beams for _, seq in prompt_beams], device=device)
                logits = model(ids)[:, -1]
            log_probs = torch.log_softmax(logits.float(), dim=-1).tolist()
            parents, new_beams = [], []
            for p, prompt_beams in enumerate(beams):
                candidates = []
                for b, (score, seq) in enumerate(prompt_beams):
                    row = log_probs[p * num_beams + b]
                    candidates += [(-(score + lp), b * len(row) + t, b, t) for t, lp in enumerate(row)]
                candidates.sort(key=lambda c: (c[0], c[1]))
                kept = candidates[:num_beams]
                new_beams.append([(-c[0], prompt_beams[c[2]][1] + [c[3]]) for c in kept])
                parents += [p * num_beams + c[2] for c in kept]
            beams = new_beams
            if cache is not None and step + 1 < max_new_tokens:
                cache.reorder(torch.tensor(parents, device=device))
                tokens = torch.tensor([[seq[-1]] for prompt_beams in beams for _, seq in prompt_beams], device=device)
                logits = model(tokens, cache=cache)[:, -1]
    return torch.tensor([prompt_beams[0][1] for prompt_beams in beams], dtype=torch.long).to(prompt_ids.device)


# --- in the style of LLMs-from-scratch: its cache and its generate loops, written here from the task -------


@alternative("KVCache", "LLMs-from-scratch's cache: an nn.Module whose per-layer keys and values are registered "
                        "non-persistent buffers cache_k_0, cache_v_0, ... preallocated for the context length, a "
                        "ptr_current_pos pointer (length is a property over it), reset() to start again, writes at "
                        "[ptr_current_pos:ptr_current_pos + num_tokens]; reorder reassigns the buffers")
class llms_from_scratch_buffers(torch.nn.Module):
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        super().__init__()
        self.n_layers, self.context_length = n_layers, max_len
        for i in range(n_layers):
            shape = (batch_size, n_heads, max_len, d_head)
            self.register_buffer(f"cache_k_{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
            self.register_buffer(f"cache_v_{i}", torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.ptr_current_pos = 0

    @property
    def keys(self):
        return [getattr(self, f"cache_k_{i}") for i in range(self.n_layers)]

    @property
    def values(self):
        return [getattr(self, f"cache_v_{i}") for i in range(self.n_layers)]

    @property
    def max_len(self):
        return self.context_length

    @property
    def length(self):
        return self.ptr_current_pos

    @length.setter
    def length(self, value):
        self.ptr_current_pos = value

    def reset(self):
        for buffer in self.buffers():
            buffer.zero_()
        self.ptr_current_pos = 0

    def _fits(self, num_tokens):
        if self.ptr_current_pos + num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} new tokens after {self.ptr_current_pos} cached ones exceed the context "
                             f"length {self.context_length}")

    def append(self, layer, k, v):
        num_tokens = k.shape[2]
        self._fits(num_tokens)
        start, end = self.ptr_current_pos, self.ptr_current_pos + num_tokens
        getattr(self, f"cache_k_{layer}")[:, :, start:end] = k
        getattr(self, f"cache_v_{layer}")[:, :, start:end] = v
        return getattr(self, f"cache_k_{layer}")[:, :, :end], getattr(self, f"cache_v_{layer}")[:, :, :end]

    def advance(self, n):
        self._fits(n)
        self.ptr_current_pos += n

    def reorder(self, index):
        for i in range(self.n_layers):
            setattr(self, f"cache_k_{i}", getattr(self, f"cache_k_{i}").index_select(0, index))
            setattr(self, f"cache_v_{i}", getattr(self, f"cache_v_{i}").index_select(0, index))


@alternative("generate", "LLMs-from-scratch's generate_text_simple_cached: the context size from the position "
                         "embedding, the whole prompt into a fresh cache, then each new token (keepdim) fed alone; "
                         "without the cache generate_text_simple's idx_cond = idx[:, -context_size:] loop")
def llms_from_scratch_generate(model, prompt_ids, max_new_tokens, use_cache=True, temperature=0.0, top_k=None,
                               top_p=None, generator=None):
    context_size = model.pos_emb.weight.shape[0]
    if prompt_ids.shape[1] + max_new_tokens > context_size:
        raise ValueError(f"{prompt_ids.shape[1]} + {max_new_tokens} tokens exceed the context size {context_size}")
    idx = prompt_ids.to(model.tok_emb.weight.device)

    def next_token(logits):
        return sample_next_token(logits[:, -1], temperature, top_k, top_p=top_p, generator=generator).unsqueeze(-1)

    with torch.no_grad():
        if use_cache:
            cache = model.make_cache(idx.shape[0], max_len=idx.shape[1] + max_new_tokens)   # reset_kv_cache()
            logits = model(idx, cache=cache)
            for produced in range(1, max_new_tokens + 1):
                next_idx = next_token(logits)
                idx = torch.cat([idx, next_idx], dim=1)
                if produced < max_new_tokens:
                    logits = model(next_idx, cache=cache)
        else:
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -context_size:]
                idx_next = next_token(model(idx_cond))
                idx = torch.cat((idx, idx_next), dim=1)
    return idx.to(prompt_ids.device)
