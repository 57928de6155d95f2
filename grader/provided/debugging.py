# Debugging tools (provided, read-only): what a careful engineer reaches for before reading code
# line by line. None of them knows where the bugs are; each makes one kind of mistake visible.
#   show_shapes(q=q, k=k)           shape, dtype and device of each tensor, one line each
#   compare(actual, expected, what) the largest difference and where it is, True when they agree
#   count_flops(fn, *args)          matmul FLOPs that fn performs (torch's FlopCounterMode)
#   check_gradients(fn, *inputs)    torch.autograd.gradcheck in float64: are the gradients right?
#   properties(name, **facts)       a table of facts that must hold, each True or False
import torch
from torch.utils.flop_counter import FlopCounterMode


def show_shapes(**tensors):
    """Print `name: shape dtype device` for each keyword argument (anything without a shape as is)."""
    width = max((len(name) for name in tensors), default=0)
    for name, value in tensors.items():
        if hasattr(value, "shape"):
            print(f"{name.rjust(width)}: {tuple(value.shape)} {value.dtype} {value.device}")
        else:
            print(f"{name.rjust(width)}: {value!r}")


def compare(actual, expected, what, atol=1e-5):
    """Print whether `actual` matches `expected` (tensors or numbers) and, if not, the largest
    difference and the first index where it occurs; returns True when they agree."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected)
    if actual.shape != expected.shape:
        print(f"{what}: shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)} expected")
        return False
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    both_nan = a.isnan() & e.isnan()
    difference = (a - e).abs().masked_fill(both_nan, 0.0).nan_to_num(float("inf"))
    if difference.numel() == 0 or difference.max() <= atol:
        print(f"{what}: agree (largest difference {difference.max().item() if difference.numel() else 0:.2e})")
        return True
    worst = tuple(int(i) for i in torch.nonzero(difference == difference.max())[0])
    print(f"{what}: DIFFER, largest difference {difference.max().item():.3g} at index {worst}: "
          f"{a[worst].item():.6g} vs {e[worst].item():.6g} expected")
    return False


def count_flops(fn, *args, **kwargs):
    """Run fn(*args, **kwargs) under FlopCounterMode; print and return the total matmul FLOPs."""
    counter = FlopCounterMode(display=False)
    with counter:
        fn(*args, **kwargs)
    total = counter.get_total_flops()
    print(f"{getattr(fn, '__name__', 'fn')}: {total:,} FLOPs")
    return total


def check_gradients(fn, *inputs):
    """torch.autograd.gradcheck of fn on float64 copies of the inputs (finite differences against
    autograd); prints and returns whether the gradients are right."""
    inputs = tuple(x.detach().double().requires_grad_() if torch.is_tensor(x) and x.is_floating_point() else x
                   for x in inputs)
    try:
        ok = torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-4)
    except (RuntimeError, ValueError) as error:  # gradcheck raises with its own report when they differ
        print(f"gradients of {getattr(fn, '__name__', 'fn')}: WRONG ({str(error).splitlines()[0][:200]})")
        return False
    print(f"gradients of {getattr(fn, '__name__', 'fn')}: right")
    return ok


def properties(name, **facts):
    """Print each fact (a bool) that should hold for `name`, and return whether all of them do."""
    print(name)
    for fact, holds in facts.items():
        print(f"  {'yes' if holds else 'NO '}  {fact.replace('_', ' ')}")
    return all(bool(holds) for holds in facts.values())
