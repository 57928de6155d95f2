"""Correct alternatives for a3_flops_io: counts written another way than the reference (closed
forms, sums over modules, loops over heads, PyTorch's own counter on a meta-device model, float
arithmetic that stays exact). `python -m grader check a3_flops_io` proves each keeps full marks."""
import math
import time
import timeit

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from grader.mutants import alternative


def _linear_params(fan_in, fan_out, bias=True):
    return fan_in * fan_out + (fan_out if bias else 0)


def _layer_norm_params(width):
    return 2 * width


def _meta_model_and_ids(config, batch, seq_len):
    """The notebook's model, built on the meta device: shapes only, no memory, no arithmetic."""
    with torch.device("meta"):
        model = build_model(config)
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    return model, ids


# --- attention_flops -----------------------------------------------------------------------------


@alternative("attention_flops", "closed forms with no head size at all: scores = weighted sum = 2*B*L*L*D")
def closed_form_no_heads(batch, seq_len, d_model, n_heads):
    tokens = batch * seq_len
    projection = 2 * tokens * d_model * d_model
    square = 2 * batch * seq_len * seq_len * d_model      # H heads of width D/H: the H cancels
    return {"qkv_proj": 3 * projection, "scores": square, "weighted_sum": square, "out_proj": projection}


@alternative("attention_flops", "per-head loop over batch and heads, head size as a float, int() at the end")
def loop_over_heads_float(batch, seq_len, d_model, n_heads):
    d_head = d_model / n_heads                            # a float; exact, d_model is a multiple of n_heads
    counts = dict.fromkeys(("qkv_proj", "scores", "weighted_sum", "out_proj"), 0)
    for projection in ("q", "k", "v"):
        counts["qkv_proj"] += matmul_flops(batch * seq_len, d_model, d_model)
    for _ in range(batch):
        for _ in range(n_heads):
            counts["scores"] += int(2 * seq_len * d_head * seq_len)
            counts["weighted_sum"] += int(2 * seq_len * seq_len * d_head)
    counts["out_proj"] = matmul_flops(batch * seq_len, d_model, d_model)
    return counts


# --- forward_flops / training_step_flops -----------------------------------------------------


@alternative("forward_flops", "one closed-form polynomial: n_layers*(8TD^2 + 4BL^2D + 4TDF) + 2TDV, T = B*L")
def forward_closed_form(config, batch, seq_len):
    D, F_, V, T = config.d_model, config.d_ff, config.vocab_size, batch * seq_len
    per_layer = 8 * T * D * D + 4 * batch * seq_len * seq_len * D + 4 * T * D * F_
    return config.n_layers * per_layer + 2 * T * D * V


@alternative("forward_flops", "asks FlopCounterMode itself, on the notebook's model built on the meta device")
def forward_counted_on_meta(config, batch, seq_len):
    model, ids = _meta_model_and_ids(config, batch, seq_len)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids)
    return int(counter.get_total_flops())


@alternative("training_step_flops", "FlopCounterMode around forward, cross-entropy and backward on a meta-device model")
def training_counted_on_meta(config, batch, seq_len):
    model, ids = _meta_model_and_ids(config, batch, seq_len)
    with FlopCounterMode(display=False) as counter:
        logits = model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
        loss.backward()
    return int(counter.get_total_flops())


# --- parameter_count -------------------------------------------------------------------------


@alternative("parameter_count", "sums a per-module table (nn.Linear: in*out + out, LayerNorm: 2*D), layer by layer")
def parameter_count_by_module(config):
    d, f = config.d_model, config.d_ff
    modules = [("tok_emb", config.vocab_size * d), ("pos_emb", config.max_len * d)]
    for i in range(config.n_layers):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            modules.append((f"blocks.{i}.attn.{name}", _linear_params(d, d)))
        modules.append((f"blocks.{i}.ff.linear1", _linear_params(d, f)))
        modules.append((f"blocks.{i}.ff.linear2", _linear_params(f, d)))
        modules.append((f"blocks.{i}.norm1", _layer_norm_params(d)))
        modules.append((f"blocks.{i}.norm2", _layer_norm_params(d)))
    modules.append(("norm_f", _layer_norm_params(d)))
    modules.append(("lm_head", _linear_params(d, config.vocab_size, bias=False)))
    return sum(count for _, count in modules)


# --- kv_cache_bytes ------------------------------------------------------------------------------


@alternative("kv_cache_bytes", "element count 2*n_layers*B*L*D (no head split: H*D/H = D), times the element size")
def kv_cache_elements(config, batch, seq_len, bytes_per_element=2):
    elements = 2 * config.n_layers * batch * seq_len * config.d_model
    return elements * bytes_per_element


# --- decode_step_flops -----------------------------------------------------------------------


@alternative("decode_step_flops", "forward_flops of a one-token sequence plus 4*D per extra cached key per layer")
def decode_as_one_token_forward(config, batch, context_len):
    # a one-token forward already scores the token against itself; the cache adds context_len keys
    extra_keys = config.n_layers * batch * 4 * config.d_model * context_len
    return forward_flops(config, batch, 1) + extra_keys


# --- roofline ---------------------------------------------------------------------------------


@alternative("roofline_time", "if/else on the two times instead of max()")
def roofline_if_else(flops, bytes, peak_flops, peak_bytes_per_s):
    compute = flops / peak_flops
    memory = bytes / peak_bytes_per_s
    if memory > compute:
        return memory
    else:
        return compute


@alternative("is_memory_bound", "intensity strictly below the ridge point peak_flops / peak_bytes_per_s")
def below_ridge_point(flops, bytes, peak_flops, peak_bytes_per_s):
    ridge = peak_flops / peak_bytes_per_s
    return arithmetic_intensity(flops, bytes) < ridge


@alternative("is_memory_bound", "cross-multiplied, no division: bytes * peak_flops > flops * peak_bytes_per_s")
def cross_multiplied(flops, bytes, peak_flops, peak_bytes_per_s):
    return bytes * peak_flops > flops * peak_bytes_per_s


# --- measure_matmul_flops --------------------------------------------------------------------


@alternative("measure_matmul_flops", "global-RNG torch.rand inputs, perf_counter_ns, a list of times per size")
def measure_with_ns_clock(sizes, repeats=3):
    def wait():
        if device == "cuda":
            torch.cuda.synchronize()
        elif device == "mps":
            torch.mps.synchronize()

    results = []
    for n in sizes:
        a = torch.rand(n, n, device=device)
        b = torch.rand(n, n, device=device)
        torch.matmul(a, b)
        wait()
        times = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            torch.matmul(a, b)
            wait()
            times.append(max(time.perf_counter_ns() - start, 1) / 1e9)   # a float, never 0
        best = min(times)
        flops = matmul_flops(n, n, n)
        results.append(dict(size=n, seconds=best, flops=flops, flops_per_s=flops / best))
    return results


# --- more alternatives, written to look for tests that take points from correct work; the last
# ones in each file (extra dict keys, a tensor time, a float32 softmax, stacked cache tensors,
# one wasted forward) did lose points until the tests were relaxed ----------------------------


def _sync():
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _matmul_inventory(config, batch, seq_len):
    """Every matmul of DecoderOnlyLM.forward as (how many times, m, k, n)."""
    d, h, f, v = config.d_model, config.n_heads, config.d_ff, config.vocab_size
    t, dh = batch * seq_len, config.d_model // config.n_heads
    per_layer = [(4, t, d, d),                       # q, k, v, o projections
                 (batch * h, seq_len, dh, seq_len),  # q @ k^T per (batch, head)
                 (batch * h, seq_len, seq_len, dh),  # weights @ v per (batch, head)
                 (1, t, d, f), (1, t, f, d)]         # feed-forward
    return [(count * config.n_layers, m, k, n) for count, m, k, n in per_layer] + [(1, t, d, v)]


@alternative("matmul_io_bytes", "element counts of the three operand shapes via math.prod, summed, times the size")
def io_by_shapes(m, k, n, bytes_per_element=4):
    shapes = ((m, k), (k, n), (m, n))
    return sum(math.prod(shape) for shape in shapes) * bytes_per_element


@alternative("attention_matrix_bytes", "math.prod of the weights' shape, times the element size")
def attention_bytes_prod(batch, n_heads, seq_len, bytes_per_element=4):
    return math.prod((batch, n_heads, seq_len, seq_len)) * bytes_per_element


@alternative("attention_flops", "each part counted by FlopCounterMode on meta tensors (F.linear, q @ k^T, w @ v)")
def attention_counted_on_meta(batch, seq_len, d_model, n_heads):
    d_head = d_model // n_heads
    x = torch.empty(batch, seq_len, d_model, device="meta")
    w = torch.empty(d_model, d_model, device="meta")
    b = torch.empty(d_model, device="meta")
    q = torch.empty(batch, n_heads, seq_len, d_head, device="meta")
    a = torch.empty(batch, n_heads, seq_len, seq_len, device="meta")

    def count(function):
        with FlopCounterMode(display=False) as counter:
            function()
        return int(counter.get_total_flops())

    return {"qkv_proj": count(lambda: [F.linear(x, w, b) for _ in range(3)]),
            "scores": count(lambda: q @ q.transpose(-2, -1)),
            "weighted_sum": count(lambda: a @ q),
            "out_proj": count(lambda: F.linear(x, w, b))}


@alternative("ffn_flops", "closed form 4*B*L*D*F")
def ffn_closed_form(batch, seq_len, d_model, d_ff):
    return 4 * batch * seq_len * d_model * d_ff


@alternative("forward_flops", "sum over an inventory of (count, m, k, n) matmul shapes")
def forward_from_inventory(config, batch, seq_len):
    return sum(count * 2 * m * k * n for count, m, k, n in _matmul_inventory(config, batch, seq_len))


@alternative("training_step_flops", "per matmul: forward 2mkn + backward (dX and dW) 4mkn, summed over the inventory")
def training_from_inventory(config, batch, seq_len):
    total = 0
    for count, m, k, n in _matmul_inventory(config, batch, seq_len):
        forward = matmul_flops(m, k, n)
        grad_input = matmul_flops(m, n, k)      # dY @ W^T
        grad_weight = matmul_flops(k, m, n)     # X^T @ dY
        total += count * (forward + grad_input + grad_weight)
    return total


@alternative("parameter_count", "one expanded polynomial: n_layers*(4D^2 + 2DF + F + 9D) + (2V + max_len)*D + 2D")
def parameter_polynomial(config):
    d, f, v = config.d_model, config.d_ff, config.vocab_size
    return config.n_layers * (4 * d * d + 2 * d * f + f + 9 * d) + (2 * v + config.max_len) * d + 2 * d


@alternative("decode_step_flops", "closed form n_layers*B*(8D^2 + 4DF + 4D(c+1)) + 2BDV")
def decode_closed_form(config, batch, context_len):
    d, f = config.d_model, config.d_ff
    per_layer = 8 * d * d + 4 * d * f + 4 * d * (context_len + 1)
    return batch * (config.n_layers * per_layer + 2 * d * config.vocab_size)


@alternative("roofline_time",
             "classic roofline: attainable FLOP/s = min(peak, bandwidth * intensity); time = flops / that")
def roofline_attainable(flops, bytes, peak_flops, peak_bytes_per_s):
    attainable = min(peak_flops, peak_bytes_per_s * arithmetic_intensity(flops, bytes))
    return flops / attainable


@alternative("is_memory_bound", "attainable performance bandwidth * intensity strictly below the peak")
def memory_bound_attainable(flops, bytes, peak_flops, peak_bytes_per_s):
    return peak_bytes_per_s * (flops / bytes) < peak_flops


@alternative("measure_matmul_flops", "timeit.repeat (perf_counter inside), number=1, min of the repeats; torch.mm")
def measure_with_timeit(sizes, repeats=3):
    results = []
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=torch.float32)
        b = torch.randn(n, n, device=device, dtype=torch.float32)

        def product():
            torch.mm(a, b)
            _sync()

        product()                                                   # warm-up
        seconds = min(timeit.repeat(product, number=1, repeat=repeats, timer=time.perf_counter))
        flops = matmul_flops(n, n, n)
        results.append({"size": n, "seconds": seconds, "flops": flops, "flops_per_s": flops / seconds})
    return results


@alternative("measure_matmul_flops", "torch.utils.benchmark.Timer.timeit(1) per repeat (it warms up and syncs itself); "
                                     "min of the means")
def measure_with_benchmark_timer(sizes, repeats=3):
    from torch.utils.benchmark import Timer

    results = []
    for n in sizes:
        a, b = torch.rand(n, n, device=device), torch.rand(n, n, device=device)
        timer = Timer(stmt="a @ b", globals={"a": a, "b": b})
        timer.timeit(1)                                             # warm-up
        seconds = min(timer.timeit(1).mean for _ in range(repeats))
        flops = matmul_flops(n, n, n)
        results.append(dict(size=n, seconds=float(seconds), flops=flops, flops_per_s=flops / seconds))
    return results


@alternative("measure_matmul_flops", "ones matrices, 3 warm-ups, preallocated output (torch.matmul(out=)), "
                                     "sorted(times)[0]")
def measure_preallocated_out(sizes, repeats=3):
    results = []
    for n in sizes:
        a = torch.ones(n, n, device=device)
        b = torch.ones(n, n, device=device)
        c = torch.empty(n, n, device=device)
        for _ in range(3):
            torch.matmul(a, b, out=c)
        _sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            torch.matmul(a, b, out=c)
            _sync()
            times.append(time.perf_counter() - start)
        seconds = sorted(times)[0]
        results.append({"size": n, "flops": matmul_flops(n, n, n), "seconds": seconds,
                        "flops_per_s": matmul_flops(n, n, n) / seconds})
    return results


@alternative("measure_matmul_flops", "each dict also carries extra keys (repeats, gflops_per_s); "
                                     "the task lists the keys but, unlike attention_flops, not 'exactly'")
def measure_with_extra_keys(sizes, repeats=3):
    results = []
    for n in sizes:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        a @ b
        _sync()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            _sync()
            times.append(time.perf_counter() - start)
        seconds = min(times)
        flops = matmul_flops(n, n, n)
        results.append({"size": n, "seconds": seconds, "flops": flops, "flops_per_s": flops / seconds,
                        "gflops_per_s": flops / seconds / 1e9, "repeats": repeats})
    return results


@alternative("measure_matmul_flops", "the times kept in a float64 tensor; seconds = times.min() (a 0-d "
                                     "tensor, not a Python float: the task does not say float)")
def measure_tensor_seconds(sizes, repeats=3):
    results = []
    for n in sizes:
        a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
        a @ b
        _sync()
        times = torch.empty(repeats, dtype=torch.float64)
        for i in range(repeats):
            start = time.perf_counter()
            a @ b
            _sync()
            times[i] = time.perf_counter() - start
        seconds = times.min()
        flops = matmul_flops(n, n, n)
        results.append({"size": n, "seconds": seconds, "flops": flops, "flops_per_s": flops / seconds})
    return results


# --- alternatives in the styles of scaling-law accounting (Kaplan et al.'s per-token table, the EleutherAI
# cookbook's 2N / 6N rules), made exact for this course's model: every weight matrix that is multiplied
# counts (embeddings are look-ups, biases and LayerNorms count zero FLOPs), and BOTH attention matmuls,
# QK^T and AV, are counted at 2 * n_ctx * d_model FLOPs per token each ----------------------------------


def _matmul_weights(config):
    # Kaplan's non-embedding N for d_attn = d_model (QKV, project, feed-forward; no biases), plus the
    # de-embedding (the untied LM head): the parameters that enter a matmul, 2 FLOPs each per token
    d, layers = config.d_model, config.n_layers
    non_embedding = 2 * d * layers * (2 * d + config.d_ff)
    return non_embedding + d * config.vocab_size


def _attention_per_token(config, n_ctx):
    # per layer, per token: QK^T logits 2 * n_ctx * d_model, then the softmax-weighted sum of values as much
    return config.n_layers * 2 * (2 * n_ctx * config.d_model)


@alternative("forward_flops", "Kaplan-style per-token table (QKV 2*n_layer*D*3D, project 2*n_layer*D^2, "
                              "feed-forward 2*n_layer*2*D*d_ff, QK^T and AV 2*n_layer*n_ctx*D each, de-embed "
                              "2*D*V), summed and times the B*L tokens")
def kaplan_per_token_table(config, batch, seq_len):
    d, layers, n_ctx = config.d_model, config.n_layers, seq_len
    per_token = {
        "attention: QKV": 2 * layers * d * 3 * d,
        "attention: QK logits": 2 * layers * n_ctx * d,
        "attention: weighted values": 2 * layers * n_ctx * d,
        "attention: project": 2 * layers * d * d,
        "feedforward": 2 * layers * 2 * d * config.d_ff,
        "de-embed": 2 * d * config.vocab_size,
    }
    return batch * seq_len * sum(per_token.values())


@alternative("forward_flops", "the cookbook's rule C_forward = 2 * N * tokens, with N the matmul weights (Kaplan's "
                              "non-embedding 2*D*n_layer*(2D + d_ff), plus the LM head) and the attention "
                              "correction 4 * n_layer * n_ctx * D per token")
def cookbook_2n_per_token(config, batch, seq_len):
    tokens = batch * seq_len
    return 2 * _matmul_weights(config) * tokens + _attention_per_token(config, seq_len) * tokens


@alternative("training_step_flops", "the cookbook's C = 6 * N * tokens (forward 2N, backward 4N: dX and dW) plus "
                                    "three times the attention correction, from the configuration alone")
def cookbook_6n(config, batch, seq_len):
    tokens = batch * seq_len
    return 6 * _matmul_weights(config) * tokens + 3 * _attention_per_token(config, seq_len) * tokens


@alternative("decode_step_flops", "2N per new token (the cached past costs no projection) plus the attention "
                                  "correction for n_ctx = context_len + 1 keys, times the batch")
def cookbook_decode_2n(config, batch, context_len):
    return batch * (2 * _matmul_weights(config) + _attention_per_token(config, context_len + 1))


@alternative("parameter_count", "Kaplan's non-embedding N = 2*D*n_layer*(2D + d_ff) plus what it leaves out: "
                                "biases (4D + d_ff + D per layer), LayerNorms (4D per layer + 2D), token and "
                                "position embeddings, the untied LM head")
def kaplan_non_embedding_plus_rest(config):
    d, layers, f = config.d_model, config.n_layers, config.d_ff
    non_embedding = 2 * d * layers * (2 * d + f)
    biases = layers * (4 * d + f + d)
    layer_norms = layers * 2 * (2 * d) + 2 * d
    embeddings = (config.vocab_size + config.max_len) * d
    lm_head = d * config.vocab_size
    return non_embedding + biases + layer_norms + embeddings + lm_head


# --- in the styles of three more projects that count a transformer's cost: nanoGPT's estimate_mfu (the PaLM
# paper's 6N + 12*L*H*Q*T), the Chinchilla paper's per-sequence table (Hoffmann et al., appendix F) and the
# inference arithmetic of KV-cache posts (bytes per token, 2 FLOPs per weight per token). Each keeps its
# project's structure and is made exact for this course's model and FlopCounterMode's convention ----------


def _nanogpt_num_params(config):
    # nanoGPT's get_num_params: every parameter of the model, less what is never multiplied as a matrix
    # (here: both embedding tables, which are look-ups, and the 1-D biases and LayerNorm gains)
    model, _ = _meta_model_and_ids(config, 1, 1)
    n_params = sum(p.numel() for p in model.parameters())
    n_params -= model.tok_emb.weight.numel() + model.pos_emb.weight.numel()
    n_params -= sum(p.numel() for p in model.parameters() if p.dim() == 1)
    return n_params


@alternative("training_step_flops", "nanoGPT's estimate_mfu (PaLM appendix B): N from the model's own parameter "
                                    "count less embeddings, biases and norms; flops_per_token = 6N + 12*L*H*Q*T, "
                                    "flops_per_fwdbwd = flops_per_token * T, times the batch")
def nanogpt_estimate_mfu(config, batch, seq_len):
    N = _nanogpt_num_params(config)
    L, H, Q, T = config.n_layers, config.n_heads, config.d_model // config.n_heads, seq_len
    flops_per_token = 6 * N + 12 * L * H * Q * T
    flops_per_fwdbwd = flops_per_token * T
    return flops_per_fwdbwd * batch


@alternative("forward_flops", "nanoGPT's estimate_mfu divided by three: 2N + 4*L*H*Q*T per token, N counted on "
                              "the model (meta device) less embeddings, biases and norms")
def nanogpt_forward_per_token(config, batch, seq_len):
    N = _nanogpt_num_params(config)
    L, H, Q, T = config.n_layers, config.n_heads, config.d_model // config.n_heads, seq_len
    return (2 * N + 4 * L * H * Q * T) * T * batch


def _chinchilla_forward_table(config, seq_len):
    # Chinchilla's appendix F, per sequence, with key_size * num_heads kept apart from d_model as the
    # paper writes it. Its "embeddings" row (2 * seq * vocab * d_model) and its softmax row
    # (3 * heads * seq * seq) are left out: a look-up and an exp are not matmuls, and FlopCounterMode
    # counts matmuls only.
    d, heads, seq = config.d_model, config.n_heads, seq_len
    key_size = d // heads
    return {
        "attention: QKV": 2 * 3 * seq * d * (key_size * heads),
        "attention: QK logits": 2 * seq * seq * (key_size * heads),
        "attention: softmax @ query reduction": 2 * seq * seq * (key_size * heads),
        "attention: final linear": 2 * seq * (key_size * heads) * d,
        "dense block": 2 * seq * (d * config.d_ff + d * config.d_ff),
    }


@alternative("forward_flops", "Chinchilla appendix F table per sequence (QKV, QK logits, softmax @ query "
                              "reduction, final linear, dense block) times layers, plus final logits "
                              "2*seq*d_model*vocab, times the batch")
def chinchilla_table(config, batch, seq_len):
    per_layer = sum(_chinchilla_forward_table(config, seq_len).values())
    final_logits = 2 * seq_len * config.d_model * config.vocab_size
    return batch * (config.n_layers * per_layer + final_logits)


@alternative("attention_flops", "Chinchilla appendix F rows for one layer's attention, renamed to the task's "
                                "keys, times the batch")
def chinchilla_attention_rows(batch, seq_len, d_model, n_heads):
    config = ModelConfig(vocab_size=1, d_model=d_model, n_heads=n_heads, n_layers=1, d_ff=0, max_len=seq_len)
    rows = _chinchilla_forward_table(config, seq_len)
    return {"qkv_proj": batch * rows["attention: QKV"],
            "scores": batch * rows["attention: QK logits"],
            "weighted_sum": batch * rows["attention: softmax @ query reduction"],
            "out_proj": batch * rows["attention: final linear"]}


@alternative("ffn_flops", "Chinchilla appendix F dense block: 2 * seq * (d_model*ffw_size + d_model*ffw_size), "
                          "times the batch")
def chinchilla_dense_block(batch, seq_len, d_model, d_ff):
    return batch * 2 * seq_len * (d_model * d_ff + d_model * d_ff)


@alternative("kv_cache_bytes", "inference-arithmetic style: bytes per token = 2 (K and V) * bytes * n_layers * "
                               "n_heads * d_head, times the tokens held (batch * seq_len)")
def kv_bytes_per_token(config, batch, seq_len, bytes_per_element=2):
    d_head = config.d_model // config.n_heads
    bytes_per_token = 2 * bytes_per_element * config.n_layers * config.n_heads * d_head
    return bytes_per_token * batch * seq_len


@alternative("decode_step_flops", "inference-arithmetic style: 2 FLOPs per matmul weight per new token (weights "
                                  "summed from the configuration, layer by layer) plus, per layer, q.K^T and "
                                  "weights.V over the context_len + 1 cached and new keys")
def decode_two_flops_per_weight(config, batch, context_len):
    d = config.d_model
    weights_per_layer = 4 * d * d + 2 * d * config.d_ff             # wq, wk, wv, wo; w1, w2
    weights = config.n_layers * weights_per_layer + d * config.vocab_size
    attention_per_layer = 2 * 2 * d * (context_len + 1)              # q.K^T and weights.V, all heads
    return batch * (2 * weights + config.n_layers * attention_per_layer)
