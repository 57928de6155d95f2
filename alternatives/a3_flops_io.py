"""Correct alternatives for a3_flops_io: counts written another way than the reference (closed
forms, sums over modules, loops over heads, PyTorch's own counter on a meta-device model, float
arithmetic that stays exact). `python -m grader check a3_flops_io` proves each keeps full marks."""
import time

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
