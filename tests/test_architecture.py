"""docs/architecture.md draws the grader's import layers; the code keeps to them. Every module of
grader/ (a package as one entry) is in exactly one layer of the doc's block, and imports only from
its own layer or a lower one: an import up a layer, a module added without its place in the doc, or
a stale name in the doc fails here."""
import re

from test_structure import GRADER, _imports, _modules

DOC = GRADER.parent / "docs" / "architecture.md"
PACKAGES = ("lms", "stages", "runtime", "provided")


def _layers():
    """[(layer name, {entry})], highest first, from the doc's layers block."""
    text = DOC.read_text()
    block = re.search(r"<!-- layers: highest first -->\n```\n(.*?)```\n<!-- end of layers -->", text, re.S)
    assert block, "docs/architecture.md has no layers block"
    layers = []
    for line in block.group(1).splitlines():
        if line.startswith(" "):                   # a long layer goes on under its first line
            layers[-1][1].update(line.split())
        elif line.strip():
            name, *entries = line.split()
            layers.append((name, set(entries)))
    return [(name, {entry.rstrip("/") for entry in entries}) for name, entries in layers]


def _entry(module):
    """grader.lms.canvas -> lms; grader.cli -> cli; the package itself -> None."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    return parts[0]


def test_every_module_has_one_place_in_the_layers():
    layers = _layers()
    listed = [entry for _, entries in layers for entry in entries]
    assert len(listed) == len(set(listed)), f"listed twice: {sorted({e for e in listed if listed.count(e) > 1})}"
    modules = {_entry(name) for name in _modules()} - {None}
    assert not modules - set(listed), f"not in docs/architecture.md's layers: {sorted(modules - set(listed))}"
    assert not set(listed) - modules, f"in the doc's layers but not in grader/: {sorted(set(listed) - modules)}"
    for package in PACKAGES:
        assert (GRADER / package / "__init__.py").exists() and package in listed


def _upward(layers):
    """Each import from a module to one in a higher layer than its own, in words."""
    rank = {entry: level for level, (_, entries) in enumerate(reversed(layers)) for entry in entries}
    names = {level: name for level, (name, _) in enumerate(reversed(layers))}
    upward = []
    for module, targets in _imports(_modules()).items():
        here = _entry(module)
        for target in targets:
            there = _entry(target)
            if here and there and here != there and rank[there] > rank[here]:
                upward.append(f"{module} ({names[rank[here]]}) imports {target} ({names[rank[there]]})")
    return sorted(upward)


def test_no_import_runs_up_a_layer():
    upward = _upward(_layers())
    assert not upward, "imports up a layer (docs/architecture.md):\n" + "\n".join(upward)


def test_an_import_up_a_layer_is_found():
    """The roster put among the parts: it imports the LMS formats and the store, a layer up."""
    layers = [(name, entries - {"roster"}) for name, entries in _layers()]
    layers[-1][1].add("roster")
    assert "grader.roster (parts) imports grader.lms (course)" in _upward(layers)


def test_no_module_imports_a_stage():
    """A stage applies a library; nothing but the pipeline (and the stages' own package) imports one."""
    found = sorted(f"{module} imports {target}" for module, targets in _imports(_modules()).items()
                   for target in targets
                   if target.startswith("grader.stages.") and module not in ("grader.pipeline",)
                   and not module.startswith("grader.stages"))
    assert not found, "; ".join(found)


def test_the_doc_names_no_module_that_is_gone():
    text = DOC.read_text()
    named = set(re.findall(r"grader/([a-z_]+(?:/[a-z_]+)?\.py)", text)) - {"lms/quizhub.py"}   # the made-up LMS
    missing = sorted(path for path in named if not (GRADER / path).exists())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
