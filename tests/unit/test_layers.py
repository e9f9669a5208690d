"""The tree shows the architecture: server -> graphs -> nodes -> tools, shared nodes before protocol nodes."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LAYERS = ["tools", "nodes", "graphs", "server"]  # each may import only the ones before it


def _modules() -> dict[str, set[str]]:
    """Every project module and the project modules it imports (anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            imported = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported.add(node.module)
                elif isinstance(node, ast.Import):
                    imported.update(alias.name for alias in node.names)
            graph[name] = {m for m in imported if m.split(".")[0] in LAYERS}
    return graph


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str):
    layer = LAYERS.index(module.split(".")[0])
    upward = [m for m in MODULES[module] if LAYERS.index(m.split(".")[0]) > layer]
    assert upward == [], f"{module} imports a higher layer"


def test_shared_nodes_do_not_depend_on_a_protocol():
    protocols = {p.name for p in (ROOT / "nodes").iterdir() if (p / "__init__.py").exists()} - {"demo"}
    for module, imported in MODULES.items():
        if module.startswith("nodes.") and module.count(".") == 1:
            assert not {m for m in imported if m.split(".")[1:2] and m.split(".")[1] in protocols}, module


def test_no_import_cycles():
    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        for imported in sorted(MODULES.get(module, ())):
            if imported != module and not imported.startswith(f"{module}."):
                visit(imported, [*path, module])

    for module in sorted(MODULES):
        visit(module, [])
