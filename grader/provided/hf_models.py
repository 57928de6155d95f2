# Hugging Face transformers for the tests (provided, read-only). Nothing is downloaded: every model the
# tests use is built here from a small configuration, with random weights drawn from a seed.
import importlib
import math

import torch


def load_transformers():
    """The transformers module, or None, after a note on how to install it, where it is missing."""
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        print("These checks compare your code with Hugging Face transformers, which is not installed here. "
              "Install it with `pip install transformers` (in a notebook cell: `%pip install transformers`), "
              "restart the kernel and run the notebook again. The grader has it and runs every check.")
        return None
    transformers.logging.set_verbosity_error()
    return transformers


def seeded_weights_(module, seed, scale=1.0):
    """Give every parameter of `module` values drawn from `seed` (not from the global RNG): a matrix gets
    N(0, 1) * scale / sqrt(its smaller side), a norm's gain 1 + N(0, 0.1**2), a bias N(0, 0.1**2), so that
    every weight matters to the output (fresh gains of one and biases of zero would hide a mix-up).
    Returns the module, on the device where new tensors go."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=generator, device="cpu")     # float32: a fifth of float64's cost
            if p.dim() >= 2:
                value = noise * scale / math.sqrt(min(p.shape))
            elif name.endswith("bias"):
                value = 0.1 * noise
            else:
                value = 1.0 + 0.1 * noise
            p.copy_(value.to(p.dtype))
    return module.to(torch.empty(0).device)


def random_hf_model(model_class, config, seed):
    """A transformers model built from `config`, weights from `seed`, in eval mode."""
    return seeded_weights_(model_class(config), seed).eval()


def token_ids(batch, length, vocab_size, seed):
    """(batch, length) random token ids drawn from `seed`, where new tensors go."""
    ids = torch.randint(0, vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))
    return ids.to(torch.empty(0).device)
