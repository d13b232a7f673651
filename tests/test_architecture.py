"""The shape of the codebase (issue 15): no import cycle inside the package, modules a newcomer
can read, and each documented default written once."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import cape_pipeline

ROOT = Path(cape_pipeline.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> nx.DiGraph:
    """Module → module edges for every ``import cape_pipeline…`` anywhere in a module (function
    bodies included: a lazy import that closes a cycle is still a cycle)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("cape_pipeline"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    g.add_edge(name, sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                g.add_edges_from((name, a.name) for a in node.names if a.name.startswith("cape_pipeline"))
    return g


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_import_graph_sees_a_cycle(tmp_path):
    """The check itself: a lazy import from a package's own __init__ is found."""
    g = import_graph()
    g.add_edge("cape_pipeline.tasks.trained", "cape_pipeline.tasks")  # a lazy import of its own package
    assert any("cape_pipeline.tasks.trained" in c for c in nx.simple_cycles(g))


def _config_classes() -> list[type]:
    import dataclasses

    import cape_pipeline.models.backbones.configs
    import cape_pipeline.tasks

    found = []
    for mod in (cape_pipeline.tasks, cape_pipeline.models.backbones.configs):
        found += [c for c in vars(mod).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]
    return found


def test_subclass_configs_do_not_repeat_a_default():
    """A config subclass (e.g. a task's) writes a field again only to change its default."""
    import dataclasses

    repeated = []
    for cls in _config_classes():
        own = cls.__dict__.get("__annotations__", {})
        for base in cls.__mro__[1:]:
            if not dataclasses.is_dataclass(base):
                continue
            inherited = {f.name: f for f in dataclasses.fields(base)}
            for name in own:
                f = inherited.get(name)
                if f is not None and f.default is not dataclasses.MISSING and f.default == cls.__dict__.get(name):
                    repeated.append(f"{cls.__name__}.{name} = {f.default!r} (as in {base.__name__})")
            break
    assert not repeated, repeated


def test_no_module_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_models_is_torch_only():
    """models/ holds torch modules only (issue 41): no module of it imports AnnData, scanpy, the
    preprocessing, the tasks or the I/O, lazily or not (a trained model with its genes and
    preprocessing is tasks.TrainedModel)."""
    banned = ("anndata", "scanpy", "cape_pipeline.pp", "cape_pipeline.tasks", "cape_pipeline.io")
    found = []
    for path in (ROOT / "models").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.name}: {n}" for n in names if n.startswith(banned)]
    assert not found, found
