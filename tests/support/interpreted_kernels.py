"""Triton kernels whose answers depend on what grader/runtime/record.py fast_triton_interpreter() skips in Triton's
interpreter (tests/test_speed_paths.py): integer arithmetic (int32 that wraps, int64, pointer offsets), helpers
called from a kernel (Triton's tl.max and tl.sum, and one of its own) in a loop, and a kernel that raises inside
a helper. Imported only where the interpreter runs kernels (TRITON_INTERPRET=1): a kernel's helpers must be
module globals, as in a notebook."""
import torch
import triton
import triton.language as tl


@triton.jit
def integer_kernel(X, OUT32, OUT64, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offsets, mask=offsets < n, other=0)
    tl.store(OUT32 + offsets, x * 65537 + 2147483000 - offsets * 3, mask=offsets < n)
    tl.store(OUT64 + offsets, x.to(tl.int64) * 4294967311 - n, mask=offsets < n)


@triton.jit
def softmax_row(x):
    shifted = x - tl.max(x, 0)
    return tl.exp(shifted) / tl.sum(tl.exp(shifted), 0)


@triton.jit
def helper_kernel(X, OUT, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(X + tl.program_id(0) * n + offsets, mask=offsets < n, other=float("-inf"))
    for step in range(STEPS):
        x = softmax_row(x * (step + 1.0))
    tl.store(OUT + tl.program_id(0) * n + offsets, x, mask=offsets < n)


@triton.jit
def failing_kernel(X, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    tl.store(X + tl.arange(0, BLOCK), softmax_row(x) + softmax_row(X))   # a pointer has no maximum


def builtins_in_place():
    """The names of triton.language, triton.language.core and their tensor class that hold Triton's own
    builtins (the interpreter patches them, and leaves some patched)."""
    return {owner.__name__: sorted(name for name, value in vars(owner).items() if tl.core.is_builtin(value))
            for owner in (tl, tl.core, tl.core.tensor)}


def run():
    """(the kernels' answers, the error the failing one raised, builtins_in_place() afterwards)."""
    x = torch.arange(-20, 20, dtype=torch.int32) * 98765
    out32, out64 = torch.empty_like(x), torch.empty(x.shape, dtype=torch.int64)
    integer_kernel[(triton.cdiv(x.numel(), 16),)](x, out32, out64, x.numel(), BLOCK=16)
    rows = torch.randn(3, 13, generator=torch.Generator().manual_seed(0))
    answers = [out32, out64]
    for steps in (1, 3):
        answers.append(torch.empty_like(rows))
        helper_kernel[(3,)](rows, answers[-1], 13, BLOCK=16, STEPS=steps)
    try:
        failing_kernel[(1,)](torch.ones(16), BLOCK=16)
        error = None
    except Exception as exception:  # noqa: BLE001 - the error itself is what is compared
        error = (type(exception).__name__, str(exception))
    return answers, error, builtins_in_place()
