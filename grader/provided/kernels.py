# Kernel probes (provided, read-only): how many Triton kernels a function launches, and which matrix
# products and softmaxes it leaves to PyTorch instead (a kernel that falls back to PyTorch is not one).
import torch

# PyTorch operators that do attention's arithmetic: a matrix product, a softmax or a logsumexp
HOST_ATTENTION_OPS = ("mm", "bmm", "matmul", "addmm", "baddbmm", "einsum", "softmax", "_softmax", "log_softmax",
                      "_log_softmax", "logsumexp", "scaled_dot_product")


def triton_launches(function, *args, **kwargs):
    """Run function(*args, **kwargs); return (its result, how many Triton kernels it launched). A launch is
    `kernel[grid](...)` of a @triton.jit function: compiled on a GPU, run by the interpreter on a CPU."""
    from triton.runtime.jit import JITFunction
    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # a Triton without the interpreter: compiled kernels only
        pass
    launches = [0]

    def counted(run):
        def run_and_count(self, *run_args, **run_kwargs):
            if not run_kwargs.get("warmup"):
                launches[0] += 1
            return run(self, *run_args, **run_kwargs)
        return run_and_count

    originals = {cls: cls.__dict__["run"] for cls in classes if "run" in cls.__dict__}
    for cls, run in originals.items():
        cls.run = counted(run)
    try:
        result = function(*args, **kwargs)
    finally:
        for cls, run in originals.items():
            cls.run = run
    return result, launches[0]


def host_attention_ops(function, *args, **kwargs):
    """Run function(*args, **kwargs); return (its result, the sorted names of the matrix products,
    softmaxes and logsumexps that PyTorch computed inside it). A Triton kernel's arithmetic is not
    PyTorch's: for a function whose kernels do the attention, the list is empty."""
    try:   # a private module: present from torch 2.2 on (the course's minimum), but it may move
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as error:
        raise ImportError(f"host_attention_ops needs torch.utils._python_dispatch (torch >= 2.2); this is "
                          f"torch {torch.__version__}: install a torch the course supports") from error
    used = set()

    class _RecordOperators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = str(func.overloadpacket).split(".")[-1]
            if name in HOST_ATTENTION_OPS or name.startswith("_scaled_dot_product"):
                used.add(name)
            return func(*args, **(kwargs or {}))

    # as in largest_new_tensor: the unwrapped method, without torch._dynamo's first-call import
    _RecordOperators.__torch_dispatch__ = getattr(_RecordOperators.__torch_dispatch__, "__wrapped__",
                                                  _RecordOperators.__torch_dispatch__)
    with _RecordOperators():
        result = function(*args, **kwargs)
    return result, sorted(used)
