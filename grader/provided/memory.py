# Memory probe (provided, read-only): the largest tensor a function creates, recorded for every
# operation PyTorch dispatches inside it, as torch.utils.flop_counter.FlopCounterMode records FLOPs.
import torch


def largest_new_tensor(function, *args, **kwargs):
    """Run function(*args, **kwargs); return (its result, the number of elements of the largest
    tensor that any operation inside it created). A result that shares memory with an operation's
    input (a slice, .view, .expand, .transpose, an in-place update) is not new and does not count;
    a copy (.contiguous(), .reshape of an expanded tensor, torch.cat, a matmul's output) does."""
    try:   # a private module: present from torch 2.2 on (the course's minimum), but it may move
        from torch.utils._python_dispatch import TorchDispatchMode
    except ImportError as error:
        raise ImportError(f"largest_new_tensor needs torch.utils._python_dispatch (torch >= 2.2); "
                          f"this is torch {torch.__version__}: install a torch the course supports") from error

    largest = [0]

    def tensors(value, found):
        # an operation's arguments and results hold tensors in tuples, lists and dicts only; walked here
        # rather than with torch.utils._pytree, which took most of the time of a run under this probe
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            for item in value:
                tensors(item, found)
        elif isinstance(value, dict):
            for item in value.values():
                tensors(item, found)
        return found

    class _RecordSizes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            # only a result larger than the largest so far can change it: the inputs are looked at for those
            larger = [tensor for tensor in tensors(result, []) if tensor.numel() > largest[0]]
            if larger:
                inputs = {t.untyped_storage().data_ptr() for t in tensors((args, kwargs), [])}
                for tensor in larger:
                    if tensor.untyped_storage().data_ptr() not in inputs:
                        largest[0] = max(largest[0], tensor.numel())
            return result

    # TorchDispatchMode wraps the method to keep torch.compile out of it, and the wrapper's first
    # call imports torch._dynamo (about 1 s per kernel). Nothing here is compiled: use it unwrapped.
    _RecordSizes.__torch_dispatch__ = getattr(_RecordSizes.__torch_dispatch__, "__wrapped__",
                                              _RecordSizes.__torch_dispatch__)
    with _RecordSizes():
        result = function(*args, **kwargs)
    return result, largest[0]
