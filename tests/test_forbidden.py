"""The static check for PyTorch's built-in attention in a submission's own code (grader/forbidden.py)."""
from grader.forbidden import forbidden_uses


def test_own_function_and_messages_are_fine():
    source = ('def scaled_dot_product_attention(q, k, v):\n    return q\n'
              'print("implement scaled_dot_product_attention first")\n'
              'out = scaled_dot_product_attention(1, 2, 3)\n')
    assert forbidden_uses(source) == []


def test_every_way_to_reach_the_builtin_is_found():
    cases = [
        "import torch.nn.functional as F\nF.scaled_dot_product_attention(q, k, v)",
        "from torch.nn.functional import scaled_dot_product_attention as sdpa",
        "impl = torch._C._nn.scaled_dot_product_attention",
        "f = getattr(F, 'scaled_dot_' + 'product_attention')",
        "layer = torch.nn.MultiheadAttention(8, 2)",
        "from torch._C import _nn",
        "op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    ]
    for source in cases:
        assert forbidden_uses(source), source
