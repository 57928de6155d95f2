# Test helpers for this notebook's visible and hidden tests (provided, read-only).
# Each check compares what your code returned (`actual`) with what it should be (`expected`)
# and, if they differ, stops with a message: what was expected, what came back, and the
# likely mistake. The grader makes the very same comparisons in a separate process, so
# these helpers are here to help you, not to be worked around.
import math
import zlib

import torch


class CheckFailed(AssertionError):
    """A test found a difference between your result and the expected one."""


def seeded_randn(*shape, seed, dtype=torch.float32, device=None):
    """Standard-normal tensor that depends only on `seed` (not on the global RNG). Drawn on the
    CPU, so the numbers are the same on every machine, then moved to `device` (default: where
    new tensors go, normally the CPU)."""
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(*shape, generator=generator, dtype=dtype, device="cpu")
    return values.to(torch.empty(0).device if device is None else device)


def seeded_generator(seed):
    """A torch.Generator seeded with `seed`, on the device where new tensors go (normally the CPU),
    so the numbers drawn with it (torch.randint, torch.multinomial, ...) are created there too."""
    return torch.Generator(device=torch.empty(0).device).manual_seed(seed)


# the attribute names the course's tasks fix, each with the names the task fixes inside it
_TASK_NAMES = {"tok_emb": (), "pos_emb": (), "blocks": ("attn", "ff", "norm1", "norm2"), "norm_f": (), "lm_head": (),
               "attn": ("q_proj", "k_proj", "v_proj", "o_proj"), "ff": ("linear1", "linear2"), "norm1": (),
               "norm2": (), "q_proj": (), "k_proj": (), "v_proj": (), "o_proj": (), "linear1": (), "linear2": ()}


def _attribute(owner, name):
    """owner.<name> as a test would write it (a property counts), or None where there is none."""
    try:
        return getattr(owner, name)
    except Exception:  # noqa: BLE001 - no such attribute, or a property that cannot answer: not there
        return None


def task_parameters(module):
    """{task path: tensor} for every `weight` and `bias` parameter of the layers the course's tasks name,
    reachable from `module` through those names (`q_proj.weight`, `blocks.0.attn.o_proj.bias`, ...), found
    by attribute access, exactly as a test writes `layer.q_proj.weight`: however the class registers its
    layers (`W_q` with a `q_proj` property, an alias, rows of a fused projection), the task's names decide.
    `module` may be any of the task's classes that hold named layers (a layer with projections, a block, a
    model). Only parameters count, and only on the named layers themselves: a buffer (nanoGPT's and GPT-2's
    causal mask `bias`, a `weight` or `mask` buffer), on the model, a block or anywhere else, is never in it,
    nor are weights the module holds under other names only."""
    found = {}
    try:   # the storages of the module's parameters: a fused projection's rows are views into one of them
        storages = {p.untyped_storage().data_ptr() for p in module.parameters()}
    except Exception:  # noqa: BLE001 - not an nn.Module: only nn.Parameter objects count
        storages = set()

    def is_parameter(value):
        return isinstance(value, torch.nn.Parameter) or (
            isinstance(value, torch.Tensor) and value.numel() > 0 and value.untyped_storage().data_ptr() in storages)

    def visit(owner, prefix, names):
        if not names:   # a layer the task names (q_proj, norm1, lm_head, ...): its own weight and bias
            for name in ("weight", "bias"):
                value = _attribute(owner, name)
                if is_parameter(value):
                    found[prefix + name] = value
            return
        for name in names:
            child = _attribute(owner, name)
            if child is None or isinstance(child, (torch.Tensor, str, int, float, bool)):
                continue
            if name != "blocks":
                visit(child, f"{prefix}{name}.", _TASK_NAMES[name])
                continue
            try:
                layers = [child[i] for i in range(len(child))]
            except Exception:  # noqa: BLE001 - not a list of blocks: nothing to find there
                continue
            for index, layer in enumerate(layers):
                visit(layer, f"{prefix}blocks.{index}.", _TASK_NAMES["blocks"])

    visit(module, "", tuple(_TASK_NAMES))
    return found


def randomize_parameters_(module, seed, scale=0.5):
    """Fill the weight and bias parameters of the layers of `module` that the task names (see
    task_parameters; never a buffer such as a causal mask registered as `bias`), each from `seed` and
    its task path, e.g. `blocks.0.attn.q_proj.weight`: a test knows the weights whatever the class
    registers them under and whatever order it creates them in. Use it only where the task fixes
    every name (e.g. `q_proj`, `blocks`, `lm_head`). Parameters outside those names (a student's
    own extra modules) are left as the module's __init__ made them: the task gives them no expected
    value, and a fused weight behind the task's names is filled through them."""
    with torch.no_grad():
        for path, tensor in task_parameters(module).items():
            values = seeded_randn(*tensor.shape, seed=seed + zlib.crc32(path.encode()))
            tensor.copy_(scale * values.to(tensor.device, tensor.dtype))
    return module


# ---- describing values -------------------------------------------------------------------

def _describe(value):
    if isinstance(value, torch.Tensor):
        text = f"tensor of shape {tuple(value.shape)}, {str(value.dtype).replace('torch.', '')}"
        if value.device.type != "cpu":
            text += f", on {value.device}"
        if value.numel() <= 8 and value.dtype != torch.bool and value.is_floating_point():
            text += f": {[round(x, 4) for x in value.detach().cpu().flatten().tolist()]}"
        elif value.numel() <= 8:
            text += f": {value.detach().cpu().flatten().tolist()}"
        return text
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _diagnose(actual, expected):
    """Common mistakes recognisable from the numbers alone."""
    clues = []
    if actual.shape == expected.shape and expected.ndim >= 2:
        if actual.shape[-1] == actual.shape[-2] and torch.allclose(
                actual, expected.transpose(-1, -2), atol=1e-4, rtol=1e-3):
            clues.append("your result is the transpose of the expected one")
    if torch.isnan(actual).any() and not torch.isnan(expected).any():
        clues.append("your result contains NaN (a softmax over a row of -inf?)")
    return clues


# ---- comparisons: return None when fine, else a message ------------------------------------

def compare_close(actual, expected, atol=1e-5, rtol=1e-4, check_dtype=True):
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    if not isinstance(actual, torch.Tensor):
        return f"expected a torch.Tensor ({_describe(expected)}), got {type(actual).__name__}: {_describe(actual)}"
    if actual.shape != expected.shape:
        return f"wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
    if check_dtype and actual.dtype != expected.dtype:
        return (f"wrong dtype: expected {expected.dtype}, got {actual.dtype} "
                "(a tensor created with the default dtype instead of the input's?)")
    actual_cpu = actual.detach().to("cpu", torch.float64)
    expected_cpu = expected.detach().to("cpu", torch.float64)
    if torch.allclose(actual_cpu, expected_cpu, atol=atol, rtol=rtol, equal_nan=True):
        return None
    difference = (actual_cpu - expected_cpu).abs().nan_to_num(float("inf"))
    flat_index = int(difference.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat_index), actual.shape)) if actual.ndim else ()
    lines = [f"values differ (tolerance atol={atol}, rtol={rtol}); largest difference "
             f"{difference.max().item():.3g} at index {index}: expected "
             f"{expected_cpu[index].item():.6g}, got {actual_cpu[index].item():.6g}"]
    if actual.numel() <= 8:
        lines.append(f"expected {_describe(expected)}\n  got      {_describe(actual)}")
    lines += _diagnose(actual_cpu, expected_cpu)
    return "\n  ".join(lines)


def compare_equal(actual, expected):
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"expected a torch.Tensor ({_describe(expected)}), got {type(actual).__name__}"
        if actual.shape != expected.shape:
            return f"wrong shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}"
        if actual.dtype != expected.dtype:
            return f"wrong dtype: expected {expected.dtype}, got {actual.dtype}"
        if torch.equal(actual.cpu(), expected.cpu()):
            return None
        mismatches = int((actual.cpu() != expected.cpu()).sum())
        return (f"{mismatches} of {expected.numel()} entries differ\n"
                f"  expected {_describe(expected)}\n  got      {_describe(actual)}")
    if isinstance(actual, torch.Tensor) and actual.numel() == 1 and not isinstance(expected, (tuple, list)):
        actual = actual.item()
    if type(actual) is type(expected) or (isinstance(actual, (int, float, bool)) and isinstance(expected, (int, float))):
        if actual == expected:
            return None
    return f"expected {_describe(expected)}, got {_describe(actual)}"


def compare_raises(outcome, expected_name):
    """`outcome` is what calling the function did: {"raised": [class names], "message": str}."""
    raised = outcome.get("raised") or []
    if expected_name in raised:
        return None
    if not raised:
        return f"expected a {expected_name} to be raised, but the call returned normally"
    return f"expected a {expected_name}, got {raised[0]}: {outcome.get('message', '')}"


def compare_between(actual, bounds):
    """`actual` a number (or a one-element tensor) within bounds = (low, high); None: no bound."""
    low, high = bounds
    if isinstance(actual, torch.Tensor) and actual.numel() == 1:
        actual = actual.item()
    if isinstance(actual, bool) or not isinstance(actual, (int, float)) or math.isnan(actual):
        return f"expected a number, got {_describe(actual)}"
    if (low is not None and actual < low) or (high is not None and actual > high):
        wanted = (f"between {low:g} and {high:g}" if low is not None and high is not None
                  else f"at least {low:g}" if low is not None else f"at most {high:g}")
        return f"expected {wanted}, got {actual:g}"
    return None


FORBIDDEN_OPS = ("scaled_dot_product", "multi_head_attention", "transformer_encoder_layer")


def compare_no_forbidden_ops(op_names, expected=None):
    used = sorted({name for name in op_names if any(word in name for word in FORBIDDEN_OPS)})
    if not used:
        return None
    return ("your code called PyTorch's built-in attention (" + ", ".join(used) + "); this assignment "
            "asks you to write it from matmuls and softmax yourself")


COMPARISONS = {"close": compare_close, "equal": compare_equal, "between": compare_between, "raises": compare_raises,
               "no_forbidden_ops": compare_no_forbidden_ops}


# ---- what tests call -------------------------------------------------------------------------

def plain_value(value):
    """The value reduced to plain data (CPU tensors, numbers, strings, tuples, lists, dicts):
    what a check compares, and what the grader can store and reload safely."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone().as_subclass(torch.Tensor)
    if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
        return value
    if isinstance(value, (tuple, list)):  # torch.Size is a tuple
        return type(value)(plain_value(item) for item in value) if type(value) in (tuple, list) \
            else tuple(plain_value(item) for item in value)
    if isinstance(value, dict):
        return {str(key): plain_value(item) for key, item in value.items()}
    return {"unsupported value": type(value).__name__}


def _observe(kind, actual, expected, what, hint, options):
    """Judge one observation here and now (the grader replaces this to judge elsewhere)."""
    message = COMPARISONS[kind](plain_value(actual), plain_value(expected), **options)
    if message is not None:
        text = f"{what}: {message}"
        if hint:
            text += f"\n  likely mistake: {hint}"
        raise CheckFailed(text)


def check_close(actual, expected, what, hint=None, atol=1e-5, rtol=1e-4, check_dtype=True):
    """Tensors equal up to floating-point tolerance, same shape and dtype. Both are compared on the
    CPU (plain_value): a test that cares where a result lives checks `.device.type` with check_equal."""
    _observe("close", actual, expected, what, hint, dict(atol=atol, rtol=rtol, check_dtype=check_dtype))


def check_equal(actual, expected, what, hint=None):
    """Exactly equal: integers, booleans, shapes, strings, integer or boolean tensors."""
    _observe("equal", actual, expected, what, hint, {})


def check_between(actual, low, high, what, hint=None):
    """A number within [low, high] (None: no bound on that side): a count, a loss, a ratio. Check the
    quantity itself, not a True/False made from it, so that the grader sees the number."""
    _observe("between", actual, (low, high), what, hint, {})


def check_raises(exception_type, function, *args, what, hint=None, **kwargs):
    """Calling function(*args, **kwargs) must raise `exception_type` (or a subclass)."""
    try:
        function(*args, **kwargs)
        outcome = {"raised": [], "message": ""}
    except Exception as error:  # noqa: BLE001 - any exception is an observation here
        outcome = {"raised": [cls.__name__ for cls in type(error).__mro__], "message": str(error)[:300]}
    _observe("raises", outcome, exception_type.__name__, what, hint, {})


def check_no_forbidden_calls(function, *args, what, **kwargs):
    """Run function(*args) and check it does not use PyTorch's built-in attention: every torch
    function it calls, and every low-level operator those dispatch, is looked at."""
    from torch.overrides import TorchFunctionMode
    try:   # a private module: present from torch 2.2 on (the course's minimum), but it may move
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as error:
        raise ImportError(f"check_no_forbidden_calls needs torch.utils._python_dispatch (torch >= 2.2); "
                          f"this is torch {torch.__version__}: install a torch the course supports") from error

    names = []

    class _RecordFunctions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    class _RecordOperators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    # TorchDispatchMode wraps the method to keep torch.compile out of it, and the wrapper's first
    # call imports torch._dynamo (about 1 s per kernel). Nothing here is compiled: use it unwrapped.
    _RecordOperators.__torch_dispatch__ = getattr(_RecordOperators.__torch_dispatch__, "__wrapped__",
                                                  _RecordOperators.__torch_dispatch__)

    with _RecordFunctions(), _RecordOperators():
        function(*args, **kwargs)
    _observe("no_forbidden_ops", names, None, what, None, {})
