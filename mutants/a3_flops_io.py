"""Mutation catalogue for a3_flops_io: realistic wrong counts, one bug each.
`python -m grader check a3_flops_io` proves every one of them loses points."""
import time

import torch

from grader.mutants import mutant


def _mm(m, k, n):
    return 2 * m * k * n


def _attention_parts(batch, seq_len, d_model, n_heads):
    tokens = batch * seq_len
    return {"qkv_proj": 3 * _mm(tokens, d_model, d_model), "scores": _mm(batch * seq_len, d_model, seq_len),
            "weighted_sum": _mm(batch * seq_len, seq_len, d_model), "out_proj": _mm(tokens, d_model, d_model)}


def _layer_flops(config, batch, seq_len):
    tokens = batch * seq_len
    attention = 8 * tokens * config.d_model ** 2 + 4 * batch * seq_len ** 2 * config.d_model
    return attention + 4 * tokens * config.d_model * config.d_ff


def _exact_forward(config, batch, seq_len):
    return (config.n_layers * _layer_flops(config, batch, seq_len)
            + _mm(batch * seq_len, config.d_model, config.vocab_size))


def _exact_params(config):
    d, f = config.d_model, config.d_ff
    return (config.vocab_size * d + config.max_len * d
            + config.n_layers * (4 * (d * d + d) + (d * f + f) + (f * d + d) + 4 * d) + 2 * d + d * config.vocab_size)


def _decode_per_layer(config, batch, keys):
    d = config.d_model
    return 8 * batch * d * d + 4 * batch * d * keys + 4 * batch * d * config.d_ff


# --- matmul_flops / matmul_io_bytes --------------------------------------------------------


@mutant("matmul_flops", "counts multiply-adds, not FLOPs: m*k*n without the factor 2",
        fails=("test_matmul_counts", "test_forward_flops", "test_decode_step_flops", "test_measure_matmul_flops"))
def no_factor_two(m, k, n):
    return m * k * n


@mutant("matmul_io_bytes", "forgets to write the result: only the two operands counted",
        fails=("test_matmul_counts",))
def io_without_output(m, k, n, bytes_per_element=4):
    return (m * k + k * n) * bytes_per_element


@mutant("matmul_io_bytes", "bytes_per_element ignored: always 4 bytes (float32)", fails=("test_matmul_counts",))
def io_ignores_element_size(m, k, n, bytes_per_element=4):
    return (m * k + k * n + m * n) * 4


@mutant("matmul_io_bytes", "counts elements, not bytes", fails=("test_matmul_counts",))
def io_counts_elements(m, k, n, bytes_per_element=4):
    return m * k + k * n + m * n


# --- attention_flops / ffn_flops -------------------------------------------------------------


@mutant("attention_flops", "one projection instead of three for Q, K and V",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def one_projection_for_qkv(batch, seq_len, d_model, n_heads):
    parts = _attention_parts(batch, seq_len, d_model, n_heads)
    parts["qkv_proj"] = _mm(batch * seq_len, d_model, d_model)
    return parts


@mutant("attention_flops", "scores with the head size only: forgets to multiply by the number of heads",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def scores_per_head_size(batch, seq_len, d_model, n_heads):
    parts = _attention_parts(batch, seq_len, d_model, n_heads)
    d_head = d_model // n_heads
    parts["scores"] = _mm(batch * seq_len, d_head, seq_len)
    parts["weighted_sum"] = _mm(batch * seq_len, seq_len, d_head)
    return parts


@mutant("attention_flops", "multiplies by n_heads AND uses the full d_model per head",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def heads_times_full_width(batch, seq_len, d_model, n_heads):
    parts = _attention_parts(batch, seq_len, d_model, n_heads)
    parts["scores"] = n_heads * _mm(batch * seq_len, d_model, seq_len)
    parts["weighted_sum"] = n_heads * _mm(batch * seq_len, seq_len, d_model)
    return parts


@mutant("attention_flops", "causal mask halves the scores: counts only the lower triangle",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def causal_half(batch, seq_len, d_model, n_heads):
    parts = _attention_parts(batch, seq_len, d_model, n_heads)
    parts["scores"] = batch * seq_len * (seq_len + 1) * d_model
    parts["weighted_sum"] = batch * seq_len * (seq_len + 1) * d_model
    return parts


@mutant("attention_flops", "out projection forgotten", fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def no_out_projection(batch, seq_len, d_model, n_heads):
    parts = _attention_parts(batch, seq_len, d_model, n_heads)
    parts["out_proj"] = 0
    return parts


@mutant("ffn_flops", "only one linear layer of the feed-forward counted",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def ffn_one_linear(batch, seq_len, d_model, d_ff):
    return _mm(batch * seq_len, d_model, d_ff)


@mutant("ffn_flops", "assumes d_ff = 4 * d_model (GPT-2's choice) instead of using d_ff",
        fails=("test_attention_and_ffn_flops", "test_forward_flops"))
def ffn_assumes_four_d(batch, seq_len, d_model, d_ff):
    return 2 * _mm(batch * seq_len, d_model, 4 * d_model)


# --- forward_flops / training_step_flops ----------------------------------------------------


@mutant("forward_flops", "the LM head forgotten", fails=("test_forward_flops", "test_training_step_flops"))
def lm_head_forgotten(config, batch, seq_len):
    return config.n_layers * _layer_flops(config, batch, seq_len)


@mutant("forward_flops", "counts the token embedding as a one-hot matmul", fails=("test_forward_flops",))
def embedding_as_matmul(config, batch, seq_len):
    return _exact_forward(config, batch, seq_len) + _mm(batch * seq_len, config.vocab_size, config.d_model)


@mutant("forward_flops", "counts the LM head once per layer (inside the loop)", fails=("test_forward_flops",))
def lm_head_per_layer(config, batch, seq_len):
    return config.n_layers * (_layer_flops(config, batch, seq_len)
                              + _mm(batch * seq_len, config.d_model, config.vocab_size))


@mutant("forward_flops", "attention matrices for one sequence only (batch forgotten in the L^2 term)",
        fails=("test_forward_flops",))
def attention_batch_forgotten(config, batch, seq_len):
    return _exact_forward(config, batch, seq_len) - config.n_layers * 4 * (batch - 1) * seq_len ** 2 * config.d_model


@mutant("training_step_flops", "backward = 1 x forward (total 2 x forward)", fails=("test_training_step_flops",))
def backward_equals_forward(config, batch, seq_len):
    return 2 * _exact_forward(config, batch, seq_len)


@mutant("training_step_flops", "the 6 * parameters * tokens rule of thumb instead of the exact count",
        fails=("test_training_step_flops",))
def six_n_rule(config, batch, seq_len):
    return 6 * _exact_params(config) * batch * seq_len


# --- parameter_count -------------------------------------------------------------------------


@mutant("parameter_count", "LayerNorm weights and biases forgotten", fails=("test_parameter_count",))
def layer_norms_forgotten(config):
    return _exact_params(config) - (2 * config.n_layers + 1) * 2 * config.d_model


@mutant("parameter_count", "biases of the linear layers forgotten", fails=("test_parameter_count",))
def biases_forgotten(config):
    return _exact_params(config) - config.n_layers * (4 * config.d_model + config.d_ff + config.d_model)


@mutant("parameter_count", "position embedding forgotten", fails=("test_parameter_count",))
def position_embedding_forgotten(config):
    return _exact_params(config) - config.max_len * config.d_model


@mutant("parameter_count", "assumes the LM head is tied to the token embedding", fails=("test_parameter_count",))
def lm_head_tied(config):
    return _exact_params(config) - config.vocab_size * config.d_model


@mutant("parameter_count", "LayerNorm counted with a weight only (no bias)", fails=("test_parameter_count",))
def layer_norm_weight_only(config):
    return _exact_params(config) - (2 * config.n_layers + 1) * config.d_model


# --- attention_matrix_bytes / kv_cache_bytes ----------------------------------------------


@mutant("attention_matrix_bytes", "one attention matrix per batch element: heads forgotten",
        fails=("test_attention_matrix_bytes",))
def attention_bytes_without_heads(batch, n_heads, seq_len, bytes_per_element=4):
    return batch * seq_len * seq_len * bytes_per_element


@mutant("kv_cache_bytes", "keys only: the factor 2 for keys AND values forgotten", fails=("test_kv_cache_bytes",))
def kv_without_factor_two(config, batch, seq_len, bytes_per_element=2):
    return config.n_layers * batch * seq_len * config.d_model * bytes_per_element


@mutant("kv_cache_bytes", "per-head slip: d_model // n_heads without multiplying by the heads",
        fails=("test_kv_cache_bytes",))
def kv_per_head_slip(config, batch, seq_len, bytes_per_element=2):
    return 2 * config.n_layers * batch * seq_len * (config.d_model // config.n_heads) * bytes_per_element


@mutant("kv_cache_bytes", "one layer's cache only: n_layers forgotten", fails=("test_kv_cache_bytes",))
def kv_one_layer(config, batch, seq_len, bytes_per_element=2):
    return 2 * batch * seq_len * config.d_model * bytes_per_element


@mutant("kv_cache_bytes", "bytes_per_element ignored: float32 assumed", fails=("test_kv_cache_bytes",))
def kv_assumes_float32(config, batch, seq_len, bytes_per_element=2):
    return 2 * config.n_layers * batch * seq_len * config.d_model * 4


# --- decode_step_flops -----------------------------------------------------------------------


@mutant("decode_step_flops", "quadratic in context: recomputes the whole attention matrix each step",
        fails=("test_decode_step_flops",))
def decode_quadratic_attention(config, batch, context_len):
    keys = context_len + 1
    d = config.d_model
    per_layer = 8 * batch * d * d + 4 * batch * keys * keys * d + 4 * batch * d * config.d_ff
    return config.n_layers * per_layer + _mm(batch, d, config.vocab_size)


@mutant("decode_step_flops", "no cache: a full forward over context_len + 1 tokens",
        fails=("test_decode_step_flops",))
def decode_full_recompute(config, batch, context_len):
    return _exact_forward(config, batch, context_len + 1)


@mutant("decode_step_flops", "off by one: the new token does not attend to itself", fails=("test_decode_step_flops",))
def decode_forgets_itself(config, batch, context_len):
    return (config.n_layers * _decode_per_layer(config, batch, context_len)
            + _mm(batch, config.d_model, config.vocab_size))


@mutant("decode_step_flops", "LM head forgotten in the decode step", fails=("test_decode_step_flops",))
def decode_without_lm_head(config, batch, context_len):
    return config.n_layers * _decode_per_layer(config, batch, context_len + 1)


@mutant("decode_step_flops", "batch forgotten in the attention over the cache", fails=("test_decode_step_flops",))
def decode_attention_batch_forgotten(config, batch, context_len):
    d = config.d_model
    per_layer = 8 * batch * d * d + 4 * d * (context_len + 1) + 4 * batch * d * config.d_ff
    return config.n_layers * per_layer + _mm(batch, d, config.vocab_size)


# --- roofline --------------------------------------------------------------------------------


@mutant("arithmetic_intensity", "intensity inverted: bytes / flops", fails=("test_roofline",))
def intensity_inverted(flops, bytes):
    return bytes / flops


@mutant("roofline_time", "roofline as a sum of compute and memory time instead of the max",
        fails=("test_roofline",))
def roofline_sum(flops, bytes, peak_flops, peak_bytes_per_s):
    return flops / peak_flops + bytes / peak_bytes_per_s


@mutant("roofline_time", "min instead of max: the faster limit", fails=("test_roofline",))
def roofline_min(flops, bytes, peak_flops, peak_bytes_per_s):
    return min(flops / peak_flops, bytes / peak_bytes_per_s)


@mutant("is_memory_bound", "comparison inverted: compute-bound kernels called memory-bound",
        fails=("test_roofline",))
def memory_bound_inverted(flops, bytes, peak_flops, peak_bytes_per_s):
    return bool(flops / peak_flops > bytes / peak_bytes_per_s)


@mutant("is_memory_bound", "intensity compared with the ridge the wrong way round (bandwidth / peak)",
        fails=("test_roofline",))
def memory_bound_wrong_ridge(flops, bytes, peak_flops, peak_bytes_per_s):
    return bool(flops / bytes < peak_bytes_per_s / peak_flops)


@mutant("is_memory_bound", "ridge point counted as memory-bound (>= instead of >)", fails=("test_roofline",))
def memory_bound_at_ridge(flops, bytes, peak_flops, peak_bytes_per_s):
    return bool(bytes / peak_bytes_per_s >= flops / peak_flops)


# --- measure_matmul_flops --------------------------------------------------------------------


def _timed(n, repeats):
    generator = torch.Generator().manual_seed(0)       # a CPU generator: draw on the CPU, then move
    a = torch.randn(n, n, generator=generator, device="cpu").to(device)
    b = torch.randn(n, n, generator=generator, device="cpu").to(device)
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return times


@mutant("measure_matmul_flops", "rate inverted: seconds / flops", fails=("test_measure_matmul_flops",))
def rate_inverted(sizes, repeats=3):
    results = []
    for n in sizes:
        seconds = min(_timed(n, repeats))
        results.append({"size": n, "seconds": seconds, "flops": 2 * n ** 3, "flops_per_s": seconds / (2 * n ** 3)})
    return results


@mutant("measure_matmul_flops", "flops = n**3 (multiply-adds) instead of matmul_flops",
        fails=("test_measure_matmul_flops",))
def measured_flops_without_two(sizes, repeats=3):
    results = []
    for n in sizes:
        seconds = min(_timed(n, repeats))
        results.append({"size": n, "seconds": seconds, "flops": n ** 3, "flops_per_s": n ** 3 / seconds})
    return results


@mutant("measure_matmul_flops", "reports the total time of all repeats but the rate of one product",
        fails=("test_measure_matmul_flops",))
def total_time_reported(sizes, repeats=3):
    results = []
    for n in sizes:
        times = _timed(n, repeats)
        seconds = sum(times)
        results.append({"size": n, "seconds": seconds, "flops": 2 * n ** 3,
                        "flops_per_s": 2 * n ** 3 / (seconds / repeats)})
    return results


@mutant("measure_matmul_flops", "the clock read before the warm-up only: no time measured (seconds = 0)",
        fails=("test_measure_matmul_flops",))
def nothing_timed(sizes, repeats=3):
    return [{"size": n, "seconds": 0.0, "flops": 2 * n ** 3, "flops_per_s": float("inf")} for n in sizes]
