"""The shape of the codebase: no import cycle inside the package, modules a newcomer
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


def test_models_is_torch_only():
    """models/ holds torch modules only: no module of it imports AnnData, scanpy, the
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


# ---------------------------------------------------------------- Step I: one package per algorithm

#: the algorithm packages of Step I there must be (the walk below finds them; a wrong root finds none)
ALGORITHMS = {"regression", "lowrank", "learned", "screened", "baselines"}


def algorithm_packages() -> list[str]:
    """Every subpackage of ``cape_pipeline.causal``: one per algorithm (shared modules stay at its top)."""
    return sorted(f"cape_pipeline.causal.{p.parent.name}" for p in (ROOT / "causal").glob("*/__init__.py"))


def package_sources() -> dict[str, tuple[str, bool]]:
    """Module name → (source, is a package's ``__init__``) for every module of the package."""
    return {_module_name(p): (p.read_text(), p.name == "__init__.py") for p in ROOT.rglob("*.py")}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def algorithm_boundary_violations(modules: dict[str, tuple[str, bool]], packages: list[str]) -> list[str]:
    """Imports across the boundary of an algorithm package P, lazy ones included:

    - a module outside P that imports a private name of P or of a module inside it
      (``from P.fit import _x``, ``import P._inner``, or ``alias._x`` / ``P.fit._x`` after
      ``import P.fit as alias`` / ``import P.fit``);
    - a module of P that imports another algorithm package or a module inside it.
    """

    def owner(name: str) -> str | None:
        return next((p for p in packages if name == p or name.startswith(p + ".")), None)

    def private_path(mod: str, pkg: str) -> bool:
        return any(_private(part) for part in mod[len(pkg) + 1:].split(".") if part)

    found = []
    for name, (source, is_package) in modules.items():
        home = owner(name)
        tree = ast.parse(source)
        bound: dict[str, str] = {}  # local name → the module it stands for
        for node in ast.walk(tree):
            targets: list[tuple[str, str | None]] = []  # (module, name imported from it or None)
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolved against this module's package
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:  # a module or package bound by name
                        targets.append((full, None))
                        bound[alias.asname or alias.name] = full
                    else:
                        targets.append((base, alias.name))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    targets.append((alias.name, None))
                    if alias.asname:
                        bound[alias.asname] = alias.name
            for mod, attr in targets:
                pkg = owner(mod)
                if pkg is None or pkg == home:
                    continue
                if home is not None:
                    found.append(f"{name} imports {mod} (algorithm {home} imports algorithm {pkg})")
                elif private_path(mod, pkg) or (attr is not None and _private(attr)):
                    found.append(f"{name} imports the private {mod}{'.' + attr if attr else ''}")
        if home is None:
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and _private(node.attr):
                    base = _dotted(node.value)
                    if base is not None and owner(bound.get(base, base)):
                        found.append(f"{name} reads the private {base}.{node.attr}")
    return found


def test_step1_is_one_package_per_algorithm():
    assert ALGORITHMS <= {p.rsplit(".", 1)[1] for p in algorithm_packages()}


def test_algorithm_packages_keep_their_boundaries():
    """No module outside an algorithm package imports its private names, and no algorithm package
    imports another: what two algorithms share lives at the top of ``causal/``."""
    found = algorithm_boundary_violations(package_sources(), algorithm_packages())
    assert not found, found


def test_the_boundary_check_sees_a_violation():
    """The check itself: each kind of crossing, written into a module of its own, is reported,
    and the public names of a package stay allowed."""
    probes = {
        "cape_pipeline.causal.probe_private_name": "from cape_pipeline.causal.regression.fit import _fit_split\n",
        "cape_pipeline.tl.probe_alias": "import cape_pipeline.causal.regression.fit as reg\nreg._halves\n",
        "cape_pipeline.tl.probe_dotted": "import cape_pipeline.causal.screened.fit\ncape_pipeline.causal.screened.fit._csr\n",
        "cape_pipeline.causal.learned.probe_lazy": "def f():\n    from cape_pipeline.causal.lowrank import fit_low_rank_vae\n",
        "cape_pipeline.causal.screened.probe_package": "from cape_pipeline.causal import regression\n",
        "cape_pipeline.causal.lowrank.probe_relative": "from ..regression import fit_algorithm\n",
    }
    allowed = {"cape_pipeline.causal.probe_public": "from cape_pipeline.causal.regression import fit_regression\n"
                                                    "import cape_pipeline.causal.lowrank as lowrank\nlowrank.fit_algorithm\n"}
    modules = package_sources()
    modules.update({name: (source, False) for name, source in {**probes, **allowed}.items()})
    found = algorithm_boundary_violations(modules, algorithm_packages())
    for name in probes:
        assert any(f.startswith(name + " ") for f in found), (name, found)
    assert not any(f.startswith("cape_pipeline.causal.probe_public ") for f in found), found
