"""The device helper, kept here once. `python -m grader sync` copies the lines between the two
marker comments (markers included) into the setup cell of every lecture and solution notebook,
followed by `device = pick_device()`; tests/test_device_helper.py proves every copy is current.

Why not `"cuda" if torch.cuda.is_available() else "cpu"`: a runtime whose torch build ships no
kernels for its GPU (Kaggle's P100 with current torch, say) reports CUDA as available, and the
first CUDA operation then fails with "no kernel image is available". The helper runs a tiny
operation on each candidate and falls back, saying why in one line.

Stdlib + torch only; works on torch 2.2 and later (and on builds without torch.backends.mps).
"""
import torch

# --- device helper: grader/provided/device.py (do not edit) ---
def pick_device():
    """The first of cuda, mps and cpu that can really run a small matmul here; prints the choice
    in one line (and why a GPU that torch reports as available was not used)."""
    mps = getattr(torch.backends, "mps", None)                   # absent in some torch builds
    device, notes = "cpu", []
    for name, available in (("cuda", torch.cuda.is_available), ("mps", getattr(mps, "is_available", None))):
        try:
            if available is None or not available():
                continue
            x = torch.ones(4, 4, device=name)
            if (x @ x).sum().item() != 64.0:                     # .item() waits for the result
                raise RuntimeError("a 4x4 matmul gave a wrong result")
        except Exception as error:  # noqa: BLE001 - any failure means: not usable here
            reason = (str(error).strip().splitlines() or [""])[0][:160]
            notes.append(f"{name} is unusable ({type(error).__name__}: {reason})")
            continue
        device = name
        break
    if notes:
        detail = "; ".join(notes) + f"; falling back to {device}"
    elif device == "cuda":
        detail = torch.cuda.get_device_name()
    else:
        detail = "Apple GPU" if device == "mps" else "no CUDA or MPS device found"
    print(f"device: {device} ({detail})")
    return device
# --- end of device helper ---
