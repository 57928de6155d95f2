"""Mutation catalogue for a7_flash_attention_triton: realistic wrong implementations, one bug each.
`python -m grader check a7_flash_attention_triton` proves every one of them loses points.

Most bugs live inside a kernel. The reference's kernels are repeated below once each, as private helpers, with
a `BUG` switch (a constexpr string) that turns on one mistake at a time, and each mutant is the wrapper that
launches them with its bug; a mistake in a wrapper is written inline in its mutant.
"""
import math

import torch
import triton
import triton.language as tl

from grader.mutants import mutant

FWD = ("test_flash_attn_fwd", "test_flash_attn_fwd_causal", "test_flash_attn_fwd_fp16", "test_flash_attention")
BWD = ("test_flash_attn_bwd", "test_flash_attn_bwd_causal", "test_flash_attn_bwd_fp16", "test_flash_attention")


@triton.jit
def _forward_kernel(Q, K, V, OUT, LSE,
                    stride_qb, stride_qh, stride_qm, stride_qd,
                    stride_kb, stride_kh, stride_kn, stride_kd,
                    stride_vb, stride_vh, stride_vn, stride_vd,
                    stride_ob, stride_oh, stride_om, stride_od,
                    n_heads, len_q, len_k, scale,
                    CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BUG: tl.constexpr):
    block, batch_head = tl.program_id(0), tl.program_id(1)
    b, h = batch_head // n_heads, batch_head % n_heads
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, BLOCK_K)
    dims = tl.arange(0, HEAD_DIM)
    dims_q, dims_k, dims_v = dims * stride_qd, dims * stride_kd, dims * stride_vd
    if BUG == "last_stride_ignored":
        dims_q, dims_k, dims_v = dims, dims, dims
    q_start = Q + b * stride_qb + h * stride_qh
    k_start = K + b * stride_kb + h * stride_kh
    v_start = V + b * stride_vb + h * stride_vh
    if BUG == "batch_head_as_head":
        q_start, k_start, v_start = Q + batch_head * stride_qh, K + batch_head * stride_kh, V + batch_head * stride_vh
    q = tl.load(q_start + rows[:, None] * stride_qm + dims_q[None, :], mask=rows[:, None] < len_q, other=0.0)
    k_ptrs = k_start + cols[:, None] * stride_kn + dims_k[None, :]
    v_ptrs = v_start + cols[:, None] * stride_vn + dims_v[None, :]
    row_max = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, HEAD_DIM], tl.float32)
    if BUG == "float16_accumulator":
        acc = tl.zeros([BLOCK_Q, HEAD_DIM], Q.dtype.element_ty)
    shift = len_k - len_q
    if BUG == "causal_top_left":
        shift = 0
    last_key = rows[:, None] + shift
    key_end = len_k
    if CAUSAL:
        key_end = tl.minimum(len_k, (block + 1) * BLOCK_Q + shift)
        if BUG == "causal_end_in_key_blocks":
            key_end = tl.minimum(len_k, (block + 1) * BLOCK_K + shift)
    for start in range(0, key_end, BLOCK_K):
        in_keys = cols < len_k
        if BUG == "keys_unmasked":
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        else:
            k = tl.load(k_ptrs, mask=in_keys[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=in_keys[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        visible = in_keys[None, :]
        if CAUSAL:
            if BUG == "causal_diagonal_blocked":
                visible = visible & (cols[None, :] < last_key)
            else:
                visible = visible & (cols[None, :] <= last_key)
        if BUG == "padded_keys_scored_zero":
            scores = tl.where(cols[None, :] <= last_key, scores, float("-inf")) if CAUSAL else scores
        else:
            scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(scores, 1))
        if BUG == "no_running_max":
            new_max = tl.zeros([BLOCK_Q], tl.float32)
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        if BUG == "blocked_rows_nan":
            safe_max = new_max
        p = tl.exp(scores - safe_max[:, None])
        correction = tl.exp(row_max - safe_max)
        row_sum = row_sum * correction + tl.sum(p, 1)
        if BUG == "accumulator_not_rescaled":
            acc = acc + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        elif BUG == "float16_accumulator":
            acc = (acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")).to(acc.dtype)
        else:
            acc = acc * correction[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        row_max = new_max
        k_ptrs += BLOCK_K * stride_kn
        v_ptrs += BLOCK_K * stride_vn
        cols += BLOCK_K
    has_key = row_sum > 0.0
    safe_sum = tl.where(has_key, row_sum, 1.0)
    lse = tl.where(has_key, row_max + tl.log(safe_sum), float("-inf"))
    if BUG == "lse_zero_without_keys":
        lse = tl.where(row_max == float("-inf"), 0.0, row_max) + tl.log(safe_sum)
    if BUG == "blocked_rows_nan":
        safe_sum = row_sum
    out_start = OUT + b * stride_ob + h * stride_oh
    if BUG == "batch_head_as_head":
        out_start = OUT + batch_head * stride_oh
    tl.store(out_start + rows[:, None] * stride_om + dims[None, :] * stride_od,
             (acc / safe_sum[:, None]).to(OUT.dtype.element_ty), mask=rows[:, None] < len_q)
    tl.store(LSE + batch_head * len_q + rows, lse, mask=rows < len_q)


def _forward(q, k, v, causal, block_q, block_k, bug, out_dtype=None, lse_dtype=torch.float32, checked=True):
    """The reference's wrapper, launching the kernel above with one bug switched on (and without the reference's
    checks of its inputs when not `checked`)."""
    if checked:
        _check_attention_inputs(q, k, v, block_q, block_k)
    batch, heads, len_q, d = q.shape
    out = torch.empty(q.shape, dtype=out_dtype or q.dtype, device=q.device)
    lse = torch.empty(batch, heads, len_q, dtype=lse_dtype, device=q.device)
    _forward_kernel[(triton.cdiv(len_q, block_q), batch * heads)](
        q, k, v, out, lse, *q.stride(), *k.stride(), *v.stride(), *out.stride(), heads, len_q, k.shape[2],
        1.0 / math.sqrt(d), CAUSAL=causal, BLOCK_Q=block_q, BLOCK_K=block_k, HEAD_DIM=d, BUG=bug)
    return out, lse


@triton.jit
def _backward_kernels(Q, K, V, DO, LSE, DELTA, DQ, DK, DV,
                      stride_qb, stride_qh, stride_qm, stride_qd,
                      stride_kb, stride_kh, stride_kn, stride_kd,
                      stride_vb, stride_vh, stride_vn, stride_vd,
                      stride_dob, stride_doh, stride_dom, stride_dod,
                      n_heads, len_q, len_k, scale,
                      FOR_DQ: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                      HEAD_DIM: tl.constexpr, BUG: tl.constexpr):
    # the reference's two backward kernels in one: FOR_DQ picks the dQ kernel (over query blocks) or the dK/dV
    # kernel (over key blocks); dq, dk, dv are contiguous like q, k, v
    block, batch_head = tl.program_id(0), tl.program_id(1)
    b, h = batch_head // n_heads, batch_head % n_heads
    dims = tl.arange(0, HEAD_DIM)
    shift = len_k - len_q
    do_strides_b, do_strides_h, do_strides_m, do_strides_d = stride_dob, stride_doh, stride_dom, stride_dod
    if BUG == "grad_out_strides_of_q":
        do_strides_b, do_strides_h, do_strides_m, do_strides_d = stride_qb, stride_qh, stride_qm, stride_qd
    q_start = Q + b * stride_qb + h * stride_qh
    do_start = DO + b * do_strides_b + h * do_strides_h
    k_start = K + b * stride_kb + h * stride_kh
    v_start = V + b * stride_vb + h * stride_vh
    if FOR_DQ:
        rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
        in_rows = rows < len_q
        q = tl.load(q_start + rows[:, None] * stride_qm + dims[None, :] * stride_qd, mask=in_rows[:, None], other=0.0)
        if BUG == "grad_out_unmasked":
            do = tl.load(do_start + rows[:, None] * do_strides_m + dims[None, :] * do_strides_d)
        else:
            do = tl.load(do_start + rows[:, None] * do_strides_m + dims[None, :] * do_strides_d,
                         mask=in_rows[:, None], other=0.0)
        lse = tl.load(LSE + batch_head * len_q + rows, mask=in_rows, other=0.0)
        delta = tl.load(DELTA + batch_head * len_q + rows, mask=in_rows, other=0.0)
        dq = tl.zeros([BLOCK_Q, HEAD_DIM], tl.float32)
        key_end = len_k
        if CAUSAL:
            key_end = tl.minimum(len_k, (block + 1) * BLOCK_Q + shift)
        for start in range(0, key_end, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)
            in_keys = cols < len_k
            k = tl.load(k_start + cols[:, None] * stride_kn + dims[None, :] * stride_kd, mask=in_keys[:, None],
                        other=0.0)
            v = tl.load(v_start + cols[:, None] * stride_vn + dims[None, :] * stride_vd, mask=in_keys[:, None],
                        other=0.0)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            visible = in_rows[:, None] & in_keys[None, :]
            if CAUSAL and BUG != "causal_ignored":
                visible = visible & (cols[None, :] <= rows[:, None] + shift)
            if BUG == "blocked_rows_nan":
                p = tl.exp(tl.where(visible, scores, float("-inf")) - lse[:, None])
            else:
                p = tl.where(visible, tl.exp(scores - lse[:, None]), 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            if BUG == "delta_forgotten":
                ds = p * dp
            elif BUG == "delta_from_the_tile":
                ds = p * (dp - tl.sum(p * dp, 1)[:, None])
            else:
                ds = p * (dp - delta[:, None])
            if BUG == "dq_overwritten":
                dq = tl.dot(ds.to(k.dtype), k, input_precision="ieee")
            else:
                dq += tl.dot(ds.to(k.dtype), k, input_precision="ieee")
        if BUG != "dq_not_scaled":
            dq = dq * scale
        tl.store(DQ + batch_head * len_q * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :],
                 dq.to(DQ.dtype.element_ty), mask=in_rows[:, None])
    else:
        cols = block * BLOCK_K + tl.arange(0, BLOCK_K)
        in_keys = cols < len_k
        k = tl.load(k_start + cols[:, None] * stride_kn + dims[None, :] * stride_kd, mask=in_keys[:, None], other=0.0)
        v = tl.load(v_start + cols[:, None] * stride_vn + dims[None, :] * stride_vd, mask=in_keys[:, None], other=0.0)
        dk = tl.zeros([BLOCK_K, HEAD_DIM], tl.float32)
        dv = tl.zeros([BLOCK_K, HEAD_DIM], tl.float32)
        if BUG == "float16_accumulator":
            dv = tl.zeros([BLOCK_K, HEAD_DIM], DV.dtype.element_ty)
        first = 0
        if CAUSAL:
            first = tl.maximum(0, block * BLOCK_K - shift) // BLOCK_Q * BLOCK_Q
            if BUG == "causal_first_query_top_left":
                first = block * BLOCK_K // BLOCK_Q * BLOCK_Q
        for start in range(first, len_q, BLOCK_Q):
            rows = start + tl.arange(0, BLOCK_Q)
            in_rows = rows < len_q
            q = tl.load(q_start + rows[:, None] * stride_qm + dims[None, :] * stride_qd, mask=in_rows[:, None],
                        other=0.0)
            if BUG == "grad_out_unmasked":
                do = tl.load(do_start + rows[:, None] * do_strides_m + dims[None, :] * do_strides_d)
            else:
                do = tl.load(do_start + rows[:, None] * do_strides_m + dims[None, :] * do_strides_d,
                             mask=in_rows[:, None], other=0.0)
            lse = tl.load(LSE + batch_head * len_q + rows, mask=in_rows, other=0.0)
            delta = tl.load(DELTA + batch_head * len_q + rows, mask=in_rows, other=0.0)
            scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
            visible = in_rows[:, None] & in_keys[None, :]
            if CAUSAL and BUG != "causal_ignored":
                visible = visible & (cols[None, :] <= rows[:, None] + shift)
            if BUG == "blocked_rows_nan":
                p = tl.exp(tl.where(visible, scores, float("-inf")) - lse[:, None])
            else:
                p = tl.where(visible, tl.exp(scores - lse[:, None]), 0.0)
            if BUG == "float16_accumulator":
                dv = (dv + tl.dot(tl.trans(p).to(do.dtype), do, input_precision="ieee")).to(dv.dtype)
            else:
                dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision="ieee")
            dp = tl.dot(do, tl.trans(v), input_precision="ieee")
            if BUG == "delta_forgotten":
                ds = p * dp
            elif BUG == "delta_from_the_tile":
                ds = p * (dp - tl.sum(p * dp, 1)[:, None])
            else:
                ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision="ieee")
        dk = dk * scale
        offsets = batch_head * len_k * HEAD_DIM + cols[:, None] * HEAD_DIM + dims[None, :]
        tl.store(DK + offsets, dk.to(DK.dtype.element_ty), mask=in_keys[:, None])
        tl.store(DV + offsets, dv.to(DV.dtype.element_ty), mask=in_keys[:, None])


def _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, bug, grad_dtype=None):
    """The reference's backward wrapper, launching the kernels above with one bug switched on."""
    _check_attention_inputs(q, k, v, block_q, block_k)
    batch, heads, len_q, d = q.shape
    lse = lse.to(torch.float32).contiguous()
    delta = (grad_out.to(torch.float32) * out.to(torch.float32)).sum(dim=-1).contiguous()
    dq, dk, dv = (torch.empty(t.shape, dtype=grad_dtype or t.dtype, device=t.device) for t in (q, k, v))
    args = (q, k, v, grad_out, lse, delta, dq, dk, dv, *q.stride(), *k.stride(), *v.stride(), *grad_out.stride(),
            heads, len_q, k.shape[2], 1.0 / math.sqrt(d))
    for for_dq, blocks in ((False, k.shape[2]), (True, len_q)):
        grid = (triton.cdiv(blocks, block_q if for_dq else block_k), batch * heads)
        _backward_kernels[grid](*args, FOR_DQ=for_dq, CAUSAL=causal, BLOCK_Q=block_q, BLOCK_K=block_k, HEAD_DIM=d,
                                BUG=bug)
    return dq, dk, dv


# --- flash_attn_fwd: the online softmax ----------------------------------------------------------------------


@mutant("flash_attn_fwd", "rescales the running sum but not the accumulator when the max grows",
        fails=FWD + ("test_any_layout",))
def accumulator_not_rescaled(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "accumulator_not_rescaled")




@mutant("flash_attn_fwd", "no running max: exp of the raw scores, which overflows to inf for scores in the hundreds",
        fails=("test_flash_attn_fwd",))
def no_running_max(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "no_running_max")






@mutant("flash_attn_fwd", "base-2 softmax (exp2 of scores times log2 e) that stores lse in base 2, not natural log",
        fails=("test_flash_attn_fwd", "test_flash_attn_fwd_causal", "test_flash_attn_fwd_fp16"))
def lse_in_base_2(q, k, v, causal=False, block_q=16, block_k=16):
    out, lse = _forward(q, k, v, causal, block_q, block_k, "none")
    return out, lse * math.log2(math.e)


# --- flash_attn_fwd: masks and the causal diagonal ------------------------------------------------------------


@mutant("flash_attn_fwd", "loads k and v without a mask: the last key block reads past Lk (NaN in a padded buffer)",
        fails=("test_any_layout",))
def keys_unmasked(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "keys_unmasked")


@mutant("flash_attn_fwd", "masks the loads past Lk with 0 but not their scores: padded keys get weight e^0",
        fails=("test_flash_attn_fwd", "test_flash_attn_fwd_fp16", "test_any_layout"))
def padded_keys_scored_zero(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "padded_keys_scored_zero")


@mutant("flash_attn_fwd", "causal mask aligned top-left (key j <= query i) instead of bottom-right",
        fails=("test_flash_attn_fwd_causal",))
def causal_top_left(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "causal_top_left")


@mutant("flash_attn_fwd", "causal mask with j < i + shift: a query no longer sees its own position",
        fails=("test_flash_attn_fwd_causal", "test_flash_attention"))
def causal_diagonal_blocked(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "causal_diagonal_blocked")


@mutant("flash_attn_fwd", "causal loop ends after (block + 1) * BLOCK_K keys: with BLOCK_Q > BLOCK_K it stops early",
        fails=("test_flash_attn_fwd_causal",))
def causal_end_in_key_blocks(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "causal_end_in_key_blocks")


@mutant("flash_attn_fwd", "a row that sees no key subtracts -inf from -inf and divides 0 by 0: NaN, not 0",
        fails=("test_flash_attn_fwd_causal",))
def blocked_rows_nan(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "blocked_rows_nan")


@mutant("flash_attn_fwd", "a row that sees no key gets lse = 0 + log(1) = 0 instead of -inf",
        fails=("test_flash_attn_fwd_causal",))
def lse_zero_without_keys(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "lse_zero_without_keys")


# --- flash_attn_fwd: strides, dtypes, inputs ------------------------------------------------------------------


@mutant("flash_attn_fwd", "offsets by (b * H + h) * stride_h: right only when batch and heads are contiguous",
        fails=("test_any_layout",))
def batch_head_as_head(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "batch_head_as_head")




@mutant("flash_attn_fwd", "assumes the last dimension is contiguous (stride 1) instead of passing its stride",
        fails=("test_any_layout",))
def last_stride_ignored(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "last_stride_ignored")


@mutant("flash_attn_fwd", "keeps the accumulator in float16 between key blocks (cast back each step)",
        fails=("test_float32_accumulation",))
def float16_accumulator(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "float16_accumulator")


@mutant("flash_attn_fwd", "allocates out in float32: float16 inputs get a float32 output",
        fails=("test_flash_attn_fwd_fp16",))
def out_in_float32(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "none", out_dtype=torch.float32)


@mutant("flash_attn_fwd", "allocates lse in the input's dtype: float16 for float16 inputs",
        fails=("test_flash_attn_fwd_fp16",))
def lse_in_input_dtype(q, k, v, causal=False, block_q=16, block_k=16):
    return _forward(q, k, v, causal, block_q, block_k, "none", lse_dtype=q.dtype)


@mutant("flash_attn_fwd", "never checks d: any d is launched (d = 8 and 256 run, d = 48 fails inside Triton)",
        fails=("test_value_errors",))
def d_not_checked(q, k, v, causal=False, block_q=16, block_k=16):
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError("q, k and v must share batch, heads and d")
    if block_q < 16 or block_k < 16 or block_q & (block_q - 1) or block_k & (block_k - 1):
        raise ValueError("block sizes must be powers of two >= 16")
    return _forward(q, k, v, causal, block_q, block_k, "none", checked=False)


@mutant("flash_attn_fwd", "never checks the block sizes: 8 and 24 are launched", fails=("test_value_errors",))
def blocks_not_checked(q, k, v, causal=False, block_q=16, block_k=16):
    if k.shape != v.shape or q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError("q, k and v must share batch, heads and d")
    if q.shape[3] not in (16, 32, 64, 128):
        raise ValueError("d must be a power of two from 16 to 128")
    return _forward(q, k, v, causal, block_q, block_k, "none", checked=False)


@mutant("flash_attn_fwd", "checks only d: k and v with other heads, batch or length are launched as they are",
        fails=("test_value_errors",))
def shapes_not_checked(q, k, v, causal=False, block_q=16, block_k=16):
    if q.shape[3] not in (16, 32, 64, 128):
        raise ValueError("d must be a power of two from 16 to 128")
    if block_q < 16 or block_k < 16 or block_q & (block_q - 1) or block_k & (block_k - 1):
        raise ValueError("block sizes must be powers of two >= 16")
    return _forward(q, k, v, causal, block_q, block_k, "none", checked=False)


@mutant("flash_attn_fwd", "PyTorch in a kernel's clothing: the attention in torch, one Triton copy kernel for show",
        fails=("test_triton_kernels", "test_no_attention_matrix"))
def torch_with_a_token_kernel(q, k, v, causal=False, block_q=16, block_k=16):
    _check_attention_inputs(q, k, v, block_q, block_k)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(k.shape[2] - q.shape[2])
        scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    result = (weights @ v.float()).to(q.dtype)
    out = torch.empty_like(result)
    _copy_kernel[(triton.cdiv(out.numel(), 1024),)](result, out, out.numel(), BLOCK=1024)
    return out, lse


@triton.jit
def _copy_kernel(X, Y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offsets, tl.load(X + offsets, mask=offsets < n), mask=offsets < n)


# --- flash_attn_bwd -------------------------------------------------------------------------------------------


@mutant("flash_attn_bwd", "dS = P * dP: forgets to subtract D = rowsum(dO * O)", fails=BWD + ("test_any_layout",))
def delta_forgotten(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "delta_forgotten")


@mutant("flash_attn_bwd", "takes D from the current tile, rowsum(P * dP) over one key block, not the whole row",
        fails=BWD + ("test_any_layout",))
def delta_from_the_tile(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "delta_from_the_tile")




@mutant("flash_attn_bwd", "forgets the scale in dQ = dS K / sqrt(d)", fails=BWD + ("test_any_layout",))
def dq_not_scaled(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "dq_not_scaled")




@mutant("flash_attn_bwd", "dq = tl.dot(dS, K) instead of +=: only the last key block's share survives",
        fails=("test_flash_attn_bwd", "test_flash_attn_bwd_causal", "test_flash_attn_bwd_fp16"))
def dq_overwritten(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "dq_overwritten")


@mutant("flash_attn_bwd", "recomputes P without the causal mask", fails=("test_flash_attn_bwd_causal",))
def backward_causal_ignored(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "causal_ignored")


@mutant("flash_attn_bwd", "causal dK/dV loop starts at the key block's own index (top-left): misses queries if Lq < Lk",
        fails=("test_flash_attn_bwd_causal",))
def causal_first_query_top_left(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "causal_first_query_top_left")


@mutant("flash_attn_bwd", "masks S with -inf before exp(S - lse): a row with lse = -inf gives exp(-inf + inf) = NaN",
        fails=("test_flash_attn_bwd_causal",))
def backward_blocked_rows_nan(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "blocked_rows_nan")


@mutant("flash_attn_bwd", "loads dO without a mask: rows past Lq read the buffer beyond (NaN in a padded one)",
        fails=("test_any_layout",))
def grad_out_unmasked(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "grad_out_unmasked")


@mutant("flash_attn_bwd", "walks dO with q's strides, as if grad_out were laid out like q",
        fails=("test_any_layout",))
def grad_out_strides_of_q(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "grad_out_strides_of_q")


@mutant("flash_attn_bwd", "keeps dV in float16 between query blocks (cast back each step)",
        fails=("test_float32_accumulation",))
def backward_float16_accumulator(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "float16_accumulator")


@mutant("flash_attn_bwd", "allocates the gradients in float32: float16 inputs get float32 gradients",
        fails=("test_flash_attn_bwd_fp16",))
def gradients_in_float32(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    return _backward(q, k, v, out, lse, grad_out, causal, block_q, block_k, "none", grad_dtype=torch.float32)


@mutant("flash_attn_bwd", "the backward in PyTorch: rebuilds P as an (Lq, Lk) matrix and differentiates by hand",
        fails=("test_no_attention_matrix", "test_triton_kernels"))
def dense_backward(q, k, v, out, lse, grad_out, causal=False, block_q=16, block_k=16):
    _check_attention_inputs(q, k, v, block_q, block_k)
    scale = 1.0 / math.sqrt(q.shape[-1])
    qf, kf, vf, of, dof = (t.float() for t in (q, k, v, out, grad_out))
    scores = qf @ kf.transpose(-2, -1) * scale
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(k.shape[2] - q.shape[2])
        scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.exp(scores - lse[..., None].float()).nan_to_num(0.0)
    ds = p * (dof @ vf.transpose(-2, -1) - (dof * of).sum(-1, keepdim=True))
    return (ds @ kf * scale).to(q.dtype), (ds.transpose(-2, -1) @ qf * scale).to(k.dtype), \
        (p.transpose(-2, -1) @ dof).to(v.dtype)


# --- FlashAttentionFunction -----------------------------------------------------------------------------------


class _SavesForBackward(torch.autograd.Function):
    """The reference's forward: runs flash_attn_fwd, saves q, k, v, out, lse and causal."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, lse = flash_attn_fwd(q, k, v, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out


@mutant("FlashAttentionFunction", "backward returns (dq, dv, dk): the gradients of k and v swapped",
        fails=("test_flash_attention",))
class gradients_swapped(_SavesForBackward):
    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = flash_attn_bwd(q, k, v, out, lse, grad_out, ctx.causal)
        return dq, dv, dk, None


@mutant("FlashAttentionFunction", "backward forgets causal: the gradients of a causal forward come out non-causal",
        fails=("test_flash_attention",))
class causal_not_kept(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, lse = flash_attn_fwd(q, k, v, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        return (*flash_attn_bwd(q, k, v, out, lse, grad_out), None)


@mutant("FlashAttentionFunction", "backward returns three gradients for four inputs (none for causal): autograd errs",
        fails=("test_flash_attention",))
class three_gradients(_SavesForBackward):
    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        return flash_attn_bwd(q, k, v, out, lse, grad_out, ctx.causal)


@mutant("FlashAttentionFunction", "saves the (Lq, Lk) weights in the forward and differentiates them in PyTorch",
        fails=("test_no_attention_matrix",))
class weights_saved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, lse = flash_attn_fwd(q, k, v, causal)
        scores = q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).tril(k.shape[2] - q.shape[2])
            scores = scores.masked_fill(~keep, float("-inf"))
        weights = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
        ctx.save_for_backward(q, k, v, out, weights)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, weights = ctx.saved_tensors
        dof = grad_out.float()
        ds = weights * (dof @ v.float().transpose(-2, -1) - (dof * out.float()).sum(-1, keepdim=True))
        scale = 1.0 / math.sqrt(q.shape[-1])
        return ((ds @ k.float() * scale).to(q.dtype), (ds.transpose(-2, -1) @ q.float() * scale).to(k.dtype),
                (weights.transpose(-2, -1) @ dof).to(v.dtype), None)
