"""The static check of a submission's own code for PyTorch's built-in attention (used by the judge stage).

Runs in the trusted grader on the submitted source, so it cannot be switched off from the
student's kernel; it complements the run-time check (check_no_forbidden_calls), which sees
the operators actually dispatched. Together they catch a direct call, an import under
another name, a captured reference to the C binding and a name assembled from strings.
"""
import ast

from . import cells

FORBIDDEN_NAMES = {
    "scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward",
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer", "_native_multi_head_attention",
}
SUSPICIOUS_ATTRIBUTES = {"_C", "_VariableFunctions", "ops", "_nn"}  # torch._C..., torch.ops.aten...
SUSPICIOUS_WORDS = ("scaled_dot_product", "multiheadattention", "multi_head_attention", "_variablefunctions")


def forbidden_uses(source):
    """Findings as short sentences, e.g. "line 4: F.scaled_dot_product_attention"."""
    try:
        tree = cells.parse(source)
    except SyntaxError:   # a cell that does not parse still must not hide a forbidden name
        lowered = source.lower().replace("_", "")
        return [f"mentions {name}" for name in sorted(FORBIDDEN_NAMES)
                if f".{name.lower().replace('_', '')}" in lowered]
    findings = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_NAMES or node.attr.startswith("_scaled_dot_product"):
                findings.append(f"line {line}: uses .{node.attr}")
            elif node.attr in SUSPICIOUS_ATTRIBUTES and _mentions_torch(node.value):
                findings.append(f"line {line}: reaches into torch internals (.{node.attr})")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            for alias in node.names:
                if alias.name in FORBIDDEN_NAMES or module.startswith("torch._C") or module.startswith("torch.ops"):
                    findings.append(f"line {line}: imports {alias.name} from {module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torch._C"):
                    findings.append(f"line {line}: imports {alias.name}")
        elif isinstance(node, ast.Call) and _called_name(node) in DYNAMIC_LOOKUPS:
            # the strings of each argument joined, so "scaled_dot_" + "product_attention" is seen
            for argument in node.args:
                text = "".join(c.value for c in ast.walk(argument)
                               if isinstance(c, ast.Constant) and isinstance(c.value, str))
                if any(word in text.lower().replace(".", "") for word in SUSPICIOUS_WORDS):
                    findings.append(f"line {line}: looks up built-in attention by name ({_called_name(node)})")
    return findings


DYNAMIC_LOOKUPS = {"getattr", "hasattr", "eval", "exec", "compile", "__import__", "import_module",
                   "__getattribute__", "get"}


def _called_name(call):
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _mentions_torch(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in {"torch", "F", "nn", "functional"}
