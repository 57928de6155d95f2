"""The minimum Python and torch the README states for the notebooks hold: no notebook,
and no provided file copied into one, uses a torch API newer than the stated torch, or syntax
newer than the stated Python; private torch modules are imported only inside a guard that says
clearly what is missing; every torch name the code spells out exists (the CUDA-only branches CI never
runs included). Fast: reads files, imports torch.

API_INTRODUCED lists torch APIs with the release that introduced them (from the PyTorch release
notes); add a row when a notebook starts using something recent."""
import ast
import functools
import re
from pathlib import Path

import pytest

from grader import cells

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = (sorted((REPO / "lectures").glob("[0-9][0-9]_*.ipynb")) + sorted((REPO / "solutions").glob("*/*.ipynb"))
             + sorted((REPO / "assignments").glob("*/*.ipynb")))
PROVIDED = sorted((REPO / "grader" / "provided").glob("*.py"))

# (regular expression over the code, torch version that introduced it)
API_INTRODUCED = [
    (r"\btorch\.unravel_index\b", "2.2"),
    (r"\btorch\.utils\.flop_counter\b|\bFlopCounterMode\b", "2.1"),
    (r"\bscaled_dot_product_attention\b(?=\s*\()", "2.0"),   # F.… / torch.nn.functional.… (not a def)
    (r"\btorch\.compile\b", "2.0"),
    (r"\btorch\.mps\.", "2.0"),
    (r"\btorch\.func\b", "2.0"),
    (r"\.untyped_storage\(", "2.0"),
    (r"\btorch\.compiler\b", "2.1"),
    (r"\btorch\.export\b", "2.1"),
    (r"\btorch\.float8_e\w+", "2.1"),
    (r"\btorch\.nn\.attention\b", "2.2"),
    (r"\bsdpa_kernel\b", "2.3"),
    (r"\btorch\.get_default_device\b", "2.3"),
    (r"\btorch\.amp\.GradScaler\b", "2.3"),
    (r"\bnn\.RMSNorm\b|(?:\bF|functional)\.rms_norm\b|import[^\n]*\brms_norm\b", "2.4"),   # not a6's meta_rms_norm
    (r"\btorch\.library\.custom_op\b", "2.4"),
    (r"\badd_safe_globals\b", "2.4"),
    (r"\bnn\.Buffer\b", "2.5"),
    (r"\bflex_attention\b", "2.5"),
    (r"\btorch\.accelerator\b", "2.6"),
    (r"\btorch\.cuda\.(CUDAGraph|graph)\b", "1.10"),
    (r"\btorch\.cuda\.is_bf16_supported\b", "1.10"),
    (r"\btorch\.set_float32_matmul_precision\b", "1.12"),
    (r"\btorch\.inference_mode\b", "1.9"),
]
# (regular expression, Python version that introduced it): what ast's feature_version does not see
PYTHON_INTRODUCED = [
    (r"\bimport tomllib\b", "3.11"), (r"\bdatetime\.UTC\b", "3.11"), (r"\btyping\.Self\b", "3.11"),
    (r"\bmath\.(cbrt|exp2)\b", "3.11"), (r"\bitertools\.batched\b", "3.12"), (r"\btyping\.override\b", "3.12"),
    (r"\bexcept\s*\*", "3.11"),
]


def _version(text):
    return tuple(int(part) for part in text.split("."))


def _stated(what):
    readme = (REPO / "README.md").read_text()
    match = re.search(rf"\*\*{what} (\d+\.\d+) or newer\*\*", readme)
    assert match, f"the README states no minimum {what} ('**{what} X.Y or newer**')"
    return match.group(1)


def _sources():
    """(label, code) of every notebook's code cells and of every provided file."""
    out = []
    for path in NOTEBOOKS:
        nb = cells.read(path)
        code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
        out.append((str(path.relative_to(REPO)), code))
    out += [(str(path.relative_to(REPO)), path.read_text()) for path in PROVIDED]
    return out


SOURCES = _sources()


def test_the_readme_states_the_minimums():
    assert _version(_stated("torch")) >= (2, 0)
    assert _version(_stated("Python")) >= (3, 8)


@pytest.mark.parametrize("label,code", SOURCES, ids=[label for label, _ in SOURCES])
def test_no_torch_api_newer_than_the_stated_minimum(label, code):
    minimum = _version(_stated("torch"))
    newer = [f"{re.search(pattern, code).group(0)} (torch {version})" for pattern, version in API_INTRODUCED
             if _version(version) > minimum and re.search(pattern, code)]
    assert not newer, (f"{label} uses {', '.join(newer)}, newer than the README's torch {_stated('torch')}: "
                       "raise the stated minimum (README, Students) or avoid the API")


@pytest.mark.parametrize("label,code", SOURCES, ids=[label for label, _ in SOURCES])
def test_no_python_newer_than_the_stated_minimum(label, code):
    minimum = _version(_stated("Python"))
    lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]   # IPython magics
    try:
        ast.parse("\n".join(lines), feature_version=minimum[:2])
    except SyntaxError as error:
        pytest.fail(f"{label} does not parse as Python {_stated('Python')}: {error}")
    newer = [f"{re.search(p, code).group(0)} (Python {v})" for p, v in PYTHON_INTRODUCED
             if _version(v) > minimum and re.search(p, code)]
    assert not newer, f"{label} uses {', '.join(newer)}, newer than the README's Python {_stated('Python')}"


@functools.lru_cache(maxsize=None)
def _tree(code):
    """The syntax tree of `code` without its IPython magic lines; parsed once for the two tests that read it
    (neither changes it)."""
    return ast.parse("\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))))


def _private_torch_imports(tree):
    """(line, module) of each import of a private torch module (a dotted part starting with _)."""
    found = []
    for node in ast.walk(tree):
        modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for module in modules:
            parts = module.split(".")
            if parts[0] == "torch" and any(part.startswith("_") for part in parts[1:]):
                found.append((node, module))
    return found


def _guarded(tree, node):
    """Inside a try whose handler catches ImportError (or broader) and raises or prints a message."""
    for parent in ast.walk(tree):
        if not isinstance(parent, ast.Try) or not any(node is n for stmt in parent.body for n in ast.walk(stmt)):
            continue
        for handler in parent.handlers:
            names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
            catches = handler.type is None or any(
                isinstance(n, ast.Name) and n.id in {"ImportError", "ModuleNotFoundError", "Exception"}
                for n in names)
            says = any(isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and getattr(n.func, "id", getattr(
                n.func, "attr", "")) in {"print", "warn"}) for stmt in handler.body for n in ast.walk(stmt))
            if catches and says:
                return True
    return False


@pytest.mark.parametrize("label,code", SOURCES, ids=[label for label, _ in SOURCES])
def test_private_torch_modules_are_imported_behind_a_clear_guard(label, code):
    tree = _tree(code)
    unguarded = [f"line {node.lineno}: {module}" for node, module in _private_torch_imports(tree)
                 if not _guarded(tree, node)]
    assert not unguarded, (f"{label} imports a private torch module without a guard ({'; '.join(unguarded)}): "
                           "wrap it in try/except ImportError and raise an ImportError that names the module, "
                           "the torch version found and the minimum the README states")


def test_the_guard_detector():
    guarded = ("try:\n    from torch.utils._python_dispatch import TorchDispatchMode\n"
               "except ImportError as error:\n    raise ImportError('needs torch >= 2.2') from error\n")
    silent = "try:\n    from torch._C import foo\nexcept ImportError:\n    foo = None\n"
    bare = "from torch.utils._python_dispatch import TorchDispatchMode\n"
    public = "from torch.utils.flop_counter import FlopCounterMode\n"
    for source, expected in ((guarded, []), (silent, ["torch._C"]), (bare, ["torch.utils._python_dispatch"]),
                             (public, [])):
        tree = ast.parse(source)
        assert [m for n, m in _private_torch_imports(tree) if not _guarded(tree, n)] == expected, source


# ---- the code CI never runs (the CUDA branches) names only torch APIs that exist ----
# The GPU cells skip on CPU, so a misspelt `torch.cuda.grpah` would first fail on a student's GPU.
# Every dotted name rooted at an imported torch module must resolve in the installed torch (the CPU
# build carries torch.cuda's Python API too).

SCRIPTS = sorted((REPO / "benchmarks").glob("*.py")) + [REPO / "tools" / "gpu_report.py"]


def _torch_aliases(tree):
    """{local name: dotted torch path} for `import torch...` and `from torch... import ...`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    aliases[alias.asname or "torch"] = alias.name if alias.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _torch_names(tree):
    """Every `alias.attr.attr...` chain in the code, written out as a dotted torch path."""
    aliases, names = _torch_aliases(tree), set()
    for node in ast.walk(tree):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if parts and isinstance(node, ast.Name) and node.id in aliases:
            names.add(".".join([aliases[node.id]] + parts[::-1]))
    return names


@functools.lru_cache(maxsize=None)
def _resolves(dotted):
    import importlib
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):        # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            if not hasattr(obj, part):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{part}")
                    continue
                except (ImportError, AttributeError):
                    return False
            obj = getattr(obj, part)
        return True
    return False


@pytest.mark.parametrize("label,code", SOURCES + [(str(p.relative_to(REPO)), p.read_text()) for p in SCRIPTS],
                         ids=[label for label, _ in SOURCES] + [str(p.relative_to(REPO)) for p in SCRIPTS])
def test_every_torch_name_in_the_code_exists(label, code):
    pytest.importorskip("torch")
    missing = sorted(name for name in _torch_names(_tree(code)) if not _resolves(name))
    assert not missing, (f"{label} names torch APIs the installed torch does not have: {', '.join(missing)}; "
                         "a misspelling in a branch CI never runs (a CUDA-only cell?), or an API from a newer torch")


def test_the_torch_name_check_sees_a_misspelling():
    tree = ast.parse("import torch\nimport torch.nn.functional as F\nfrom torch import cuda\n"
                     "g = torch.cuda.grpah\ny = F.softmax\nz = cuda.CUDAGraph\n")
    assert {"torch.cuda.grpah", "torch.nn.functional.softmax", "torch.cuda.CUDAGraph"} <= _torch_names(tree)
    assert [name for name in sorted(_torch_names(tree)) if not _resolves(name)] == ["torch.cuda.grpah"]
