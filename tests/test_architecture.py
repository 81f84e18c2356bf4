"""The package's import graph: the CLI sits on top, and no two modules import each other.

The graph is read from the source with :mod:`ast`: every ``import`` and ``from ... import`` anywhere
in a module (inside functions too, so lazy imports count), relative imports resolved. An edge goes
to the module named: ``from .x import y`` is an edge to ``mdtheory.x.y`` when that is a module, else
to ``mdtheory.x``. The parent packages that Python runs first are not edges (every module would
otherwise depend on ``mdtheory/__init__.py``, which imports the public API). Imports under
``if TYPE_CHECKING:`` count: they are dependencies of the module's interface.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mdtheory"

#: Import cycles that remain, each a strongly connected component of the graph. The test fails when
#: one disappears as well as when one appears, so this list only shrinks. (None: the size
#: estimates import nothing above them, the routes' registry lives in solve, the models carry
#: their exact laws and _two_sum lives in _jit.)
ALLOWED_CYCLES: list[set[str]] = []


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


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph.add_edges_from((module, target) for target in imported(module, path, node))
    return graph


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert graph.has_edge("mdtheory.cli.check_acceptance", "mdtheory.solve")  # from ..solve import
    assert graph.has_edge("mdtheory.cli.verify", "mdtheory.verify")  # inside a function
    assert graph.has_edge("mdtheory.cli", "mdtheory.cli.dd")  # from . import dd
    assert graph.has_edge("mdtheory.__main__", "mdtheory.cli")
    assert graph.number_of_nodes() == len(MODULES) > 40


def test_no_module_below_the_cli_imports_it():
    graph = import_graph()
    cli = {m for m in MODULES if m == "mdtheory.cli" or m.startswith("mdtheory.cli.")}
    above = cli | {"mdtheory.__main__"}
    offenders = sorted((u, v) for u, v in graph.edges if v in cli and u not in above)
    assert offenders == []


def test_no_import_cycles_but_the_listed_ones():
    graph = import_graph()
    cycles = [set(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert sorted(map(sorted, cycles)) == sorted(map(sorted, ALLOWED_CYCLES))
    assert not any(graph.has_edge(m, m) for m in graph)
