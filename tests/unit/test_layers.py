"""The tree shows the architecture: server -> graphs -> nodes -> tools, shared nodes before protocol nodes.

Every layer is installed as ``phasegraph.<layer>``; code anywhere in the repository imports it by
that name only (a bare ``import graphs`` would load a second copy of the module from the work tree).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LAYERS = ["tools", "nodes", "graphs", "server"]  # each may import only the ones before it
#: Every Python file of the repository a user's code could import from or run.
SOURCES = [
    path
    for folder in (*LAYERS, "phasegraph", "tests", "bench")
    for path in (ROOT / folder).rglob("*.py")
    if folder == "phasegraph" or "phasegraph" not in path.relative_to(ROOT).parts[:1]
]


def _imports(path: Path) -> set[str]:
    """The absolute imports of one file, anywhere in it."""
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return imported


def _layer(module: str) -> str | None:
    """The layer of a ``phasegraph.<layer>...`` module, else None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "phasegraph" and parts[1] in LAYERS else None


def _modules() -> dict[str, set[str]]:
    """Every project module and the project modules it imports."""
    graph: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(("phasegraph", *path.relative_to(ROOT).with_suffix("").parts))
            graph[name.removesuffix(".__init__")] = {m for m in _imports(path) if _layer(m)}
    return graph


MODULES = _modules()


def test_the_tree_is_found():
    assert len(MODULES) > 150
    assert "phasegraph.graphs.run" in MODULES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str):
    layer = LAYERS.index(_layer(module))
    upward = [m for m in MODULES[module] if LAYERS.index(_layer(m)) > layer]
    assert upward == [], f"{module} imports a higher layer"


def test_shared_nodes_do_not_depend_on_a_protocol():
    protocols = {p.name for p in (ROOT / "nodes").iterdir() if (p / "__init__.py").exists()} - {"demo"}
    for module, imported in MODULES.items():
        if module.startswith("phasegraph.nodes.") and module.count(".") == 2:
            assert not {m for m in imported if m.split(".")[2:3] and m.split(".")[2] in protocols}, module


def test_no_import_cycles():
    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        for imported in sorted(MODULES.get(module, ())):
            if imported != module and not imported.startswith(f"{module}."):
                visit(imported, [*path, module])

    for module in sorted(MODULES):
        visit(module, [])


def test_nothing_imports_a_layer_by_its_bare_name():
    bare = {
        f"{path.relative_to(ROOT)}: {module}"
        for path in SOURCES
        for module in _imports(path)
        if module.split(".")[0] in LAYERS
    }
    assert len(SOURCES) > 250
    assert bare == set()
