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


@alternative("KVCache", "one preallocated buffer (2, layers, B, H, max_len, Dh); keys/values are tuples of per-layer views into it")
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


@alternative("KVCache", "torch.empty buffers (never-written slots hold garbage, which nothing may read)")
class empty_buffers:
    def __init__(self, n_layers, batch_size, n_heads, d_head, max_len, dtype=torch.float32, device=None):
        self.keys = [torch.empty(batch_size, n_heads, max_len, d_head, dtype=dtype, device=device) for _ in range(n_layers)]
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


@alternative("KVCache", "storage laid out (B, max_len, H, Dh) per layer, keys/values permuted views; length a read-only property")
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


# --- cached_attention ------------------------------------------------------------------------


@alternative("cached_attention", "fused q/k/v: torch.cat of the weights and biases, F.linear once; mask from arange comparisons, always")
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


@alternative("lm_make_cache", "sizes from q_proj.in_features and pos_emb.num_embeddings, dtype/device from parameters()")
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


@alternative("lm_forward", "uncached = cached through a throwaway cache of L positions; pos_emb.weight slices; no block.dropout")
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
