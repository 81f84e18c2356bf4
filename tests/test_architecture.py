"""The package's import graph: the layers import only downwards, the CLI sits on top, and no two
modules import each other.

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import`` anywhere
in a module (inside functions too, so lazy imports count), relative imports resolved. An edge goes
to the module named: ``from .x import y`` is an edge to ``mdtheory.x.y`` when that is a module, else
to ``mdtheory.x``. The parent packages that Python runs first are not edges (every module would
otherwise depend on ``mdtheory/__init__.py``, which imports the public API). Imports under
``if TYPE_CHECKING:`` count: they are dependencies of the module's interface.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mdtheory"

#: Import cycles that remain, each a strongly connected component of the graph. The test fails when
#: one disappears as well as when one appears, so this list only shrinks. (None: the size
#: estimates import nothing above them, the routes' registry lives in solve, the models carry
#: their exact laws and _two_sum lives in _jit.)
ALLOWED_CYCLES: list[set[str]] = []


#: The layers, lowest first: a module may import modules of its own layer and of the layers below,
#: never of a layer above. An entry names a folder (a package and its modules) or a top-level module;
#: ``=name`` names that module alone. A module takes the layer of its longest entry, so the folders
#: are the layers: every module of a folder sits on the folder's floor.
LAYERS: list[tuple[str, list[str]]] = [
    ("infrastructure", ["mdtheory.errors", "mdtheory._validate", "mdtheory._budget", "mdtheory._highs",
                        "mdtheory._jit", "mdtheory._progress", "mdtheory._synthetic"]),
    ("draft models", ["mdtheory.models"]),
    ("routes", ["mdtheory.routes"]),
    ("certificate and front door", ["mdtheory.certify", "mdtheory.result", "mdtheory.solve"]),
    ("rules", ["mdtheory.rules"]),
    ("claims", ["mdtheory.claims"]),
    ("language models", ["mdtheory.language"]),
    ("torch bridge", ["mdtheory.torch_bridge"]),
    ("audit", ["mdtheory.audit"]),
    ("blocks", ["mdtheory.blocks"]),
    ("engines", ["mdtheory.engines"]),
    ("public API", ["=mdtheory"]),
    ("command line", ["mdtheory.cli", "mdtheory.__main__"]),
]


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the module's longest entry (None: no entry names it)."""
    best, best_key = None, (-1, False)
    for index, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            exact = entry.startswith("=")
            name = entry.lstrip("=")
            if module == name or (not exact and module.startswith(name + ".")):
                key = (len(name), exact)
                if key > best_key:
                    best, best_key = index, key
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The package's modules that one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                 for alias in node.names]
    out = []
    for name in names:
        while name not in MODULES and "." in name:  # mdtheory.x.func -> mdtheory.x
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module:
            out.append(name)
    return out


@functools.cache
def _graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph.add_edges_from((module, target) for target in imported(module, path, node))
    return graph


def import_graph() -> nx.DiGraph:
    """The package's import graph (parsed once per test session; each caller gets its own copy)."""
    return _graph().copy()


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert graph.has_edge("mdtheory.cli.check_acceptance", "mdtheory.solve")  # from ..solve import
    assert graph.has_edge("mdtheory.cli.verify", "mdtheory.claims.verify")  # inside a function
    assert graph.has_edge("mdtheory.cli.audit", "mdtheory.cli.audit_block")  # from . import audit_block
    assert graph.has_edge("mdtheory.__main__", "mdtheory.cli")
    assert graph.number_of_nodes() == len(MODULES) > 40


def test_no_module_below_the_cli_imports_it():
    graph = import_graph()
    cli = {m for m in MODULES if m == "mdtheory.cli" or m.startswith("mdtheory.cli.")}
    above = cli | {"mdtheory.__main__"}
    offenders = sorted((u, v) for u, v in graph.edges if v in cli and u not in above)
    assert offenders == []


def test_every_module_has_a_layer():
    assert sorted(m for m in MODULES if layer_of(m) is None) == []


def test_the_layer_lookup():
    names = [name for name, _ in LAYERS]
    assert names[layer_of("mdtheory.models.iid")] == "draft models"
    assert names[layer_of("mdtheory.blocks.simulation")] == "blocks"
    assert names[layer_of("mdtheory.language.lm")] == "language models"
    assert names[layer_of("mdtheory.torch_bridge")] == "torch bridge"
    assert names[layer_of("mdtheory.torch_bridge.rules")] == "torch bridge"
    assert names[layer_of("mdtheory.audit.crossval")] == "audit"
    assert names[layer_of("mdtheory")] == "public API"
    assert layer_of("mdtheory.nowhere") is None
    assert layer_of("mdtheory.modelsx") is None  # an entry names a package, not a prefix of a name


def test_no_module_imports_a_layer_above_its_own():
    graph = import_graph()
    names = [name for name, _ in LAYERS]
    upward = sorted(f"{u} ({names[layer_of(u)]}) -> {v} ({names[layer_of(v)]})"
                    for u, v in graph.edges if layer_of(u) < layer_of(v))
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    """A lazy import of the command line inside a draft model's function is an upward edge."""
    module = "mdtheory.models.iid"
    source = "def f():\n    from ..cli import main\n    return main\n"
    nodes = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    targets = imported(module, MODULES[module], nodes[0])
    assert targets == ["mdtheory.cli"]
    assert layer_of(module) < layer_of(targets[0])


def test_no_import_cycles_but_the_listed_ones():
    graph = import_graph()
    cycles = [set(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert sorted(map(sorted, cycles)) == sorted(map(sorted, ALLOWED_CYCLES))
    assert not any(graph.has_edge(m, m) for m in graph)


def test_the_layers_name_folders_only():
    """No module inside a folder is given a floor of its own: every entry is a folder (a package)
    or a module at the top of the package."""
    assert [e for _, entries in LAYERS for e in entries if e.lstrip("=").count(".") > 1] == []
