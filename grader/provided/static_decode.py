# Static-shape decoding (provided, read-only; not graded): your model and your KVCache, with a decode
# step whose every tensor keeps its shape and address from one token to the next, so that on a CUDA
# GPU the step can be recorded once as a CUDA graph and replayed with a single launch per token.
# (benchmarks/kv_cache_benchmark.py runs this same class; lecture 8, section 9 derives it.)
import math

import torch


class StaticDecoder:
    """Greedy decoding of batch 1 with static shapes, run eagerly or captured as a CUDA graph.

    The prompt is prefilled by your own forward into your preallocated KVCache (cache.keys[l],
    cache.values[l], each (1, H, max_len, Dh)). Every later step keeps the same shapes and addresses:
    - the new token and its position are tensors on the device, not Python ints;
    - the new key and value are written with index_copy_ at that position (your append slices with
      the Python int cache.length, which a graph would freeze at its value during the capture);
    - attention reads all max_len positions and masks the ones after the new token, instead of
      slicing [:length], a shape that changes every step (so the cache starts zeroed: the unwritten
      positions are read too, with weight 0).
    With graph=True (CUDA only) one step is captured with torch.cuda.graph after a warm-up on a
    side stream, and replayed once per token."""

    def __init__(self, model, max_len, graph=False):
        self.model, self.graph = model, None
        weight = model.lm_head.weight
        self.cache = model.make_cache(1, max_len=max_len)
        for buffer in (*self.cache.keys, *self.cache.values):
            buffer.zero_()     # a torch.empty cache may hold inf or NaN, and the masked weight 0 times NaN is NaN
        self.token = torch.zeros(1, 1, dtype=torch.long, device=weight.device)
        self.pos = torch.zeros(1, dtype=torch.long, device=weight.device)
        self.key_positions = torch.arange(max_len, device=weight.device)
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):                       # warm-up: cuBLAS workspaces, allocator pools
                    self.pos.fill_(0)
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            self.pos.fill_(0)
            with torch.cuda.graph(self.graph):
                self.logits = self._step()

    @torch.no_grad()
    def _step(self):
        m, pos = self.model, self.pos
        x = m.tok_emb(self.token) + m.pos_emb(pos)                                   # (1, 1, D)
        batch, d_model = x.shape[0], x.shape[-1]
        blocked = self.key_positions > pos
        for i, block in enumerate(m.blocks):
            attn = block.attn
            heads, d_head = attn.n_heads, d_model // attn.n_heads
            h = block.norm1(x)
            q, k, v = (proj(h).view(batch, 1, heads, d_head).transpose(1, 2)
                       for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
            keys, values = self.cache.keys[i], self.cache.values[i]
            keys.index_copy_(2, pos, k)
            values.index_copy_(2, pos, v)
            scores = (q @ keys.transpose(-2, -1)) / math.sqrt(d_head)                # (1, H, 1, max_len)
            out = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1) @ values
            x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, 1, d_model))
            x = x + block.ff(block.norm2(x))
        pos += 1
        return m.lm_head(m.norm_f(x))[:, -1]                                          # (1, vocab)

    @torch.no_grad()
    def generate(self, prompt, n):
        """prompt (1, L) -> (1, L + n) greedy tokens, as generate(model, prompt, n) returns them."""
        self.cache.length = 0
        logits = self.model(prompt, cache=self.cache)[:, -1]                         # prefill, dynamic
        self.pos.fill_(prompt.shape[1])
        out = torch.empty(1, prompt.shape[1] + n, dtype=torch.long, device=prompt.device)
        out[:, :prompt.shape[1]] = prompt
        for i in range(n):
            token = logits.argmax(dim=-1, keepdim=True)
            out[:, prompt.shape[1] + i:prompt.shape[1] + i + 1] = token
            if i == n - 1:
                break
            self.token.copy_(token)
            if self.graph is not None:
                self.graph.replay()
                logits = self.logits
            else:
                logits = self._step()
        return out
