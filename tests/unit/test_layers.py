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
    path for folder in (*LAYERS, "phasegraph", "tests", "bench") for path in (ROOT / folder).rglob("*.py")
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
    shared = {"demo", "telemetry"}  # packages of nodes/ every protocol uses, not protocols
    protocols = {p.name for p in (ROOT / "nodes").iterdir() if (p / "__init__.py").exists()} - shared
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


#: Inside the server, jobs point down too: the command line and the routes use the run engine,
#: which uses storage; storage knows nothing of the others.
SERVER_JOBS = ["storage", "runs", "http", "cli"]
#: The longest module and class the tree keeps (longer ones get split by responsibility).
MAX_MODULE_LINES, MAX_CLASS_LINES = 400, 250


def _server_job(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["phasegraph", "server"] else None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _server_job(m) in SERVER_JOBS))
def test_server_jobs_point_down(module: str):
    job = SERVER_JOBS.index(_server_job(module))
    allowed = {"cli": {"storage", "runs", "cli"}}.get(SERVER_JOBS[job], set(SERVER_JOBS[: job + 1]))
    upward = sorted(
        m for m in MODULES[module] if _server_job(m) is not None and _server_job(m) not in allowed
    )
    assert upward == [], f"{module} imports another job's modules above its own"


def test_the_server_has_one_entry_module_and_packages_by_job():
    loose = sorted(p.name for p in (ROOT / "server").glob("*.py"))
    assert loose == ["__init__.py", "app.py"]
    jobs = sorted(p.name for p in (ROOT / "server").iterdir() if (p / "__init__.py").exists())
    assert jobs == sorted(SERVER_JOBS)


def test_modules_and_classes_stay_short():
    long_modules, long_classes = [], []
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) > MAX_MODULE_LINES:
                long_modules.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                    long_classes.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert long_modules == []
    assert long_classes == []


def test_a_module_resolves_its_own_location_once_at_import():
    """In a checkout the layers load through phasegraph/'s links, so a path made from ``__file__`` has a
    link in it. Resolved at run time, that is a blocking ``readlink`` inside the event loop, which
    ``langgraph dev`` refuses; resolved once at import, it costs nothing later."""
    unresolved = []
    for layer in LAYERS:
        for path in (ROOT / layer).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            in_functions = {
                id(node)
                for function in ast.walk(tree)
                if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
                for node in ast.walk(function)
            }
            resolved = {
                id(node.func.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "resolve"
            }
            for node in ast.walk(tree):
                here = isinstance(node, ast.Call) and [ast.unparse(a) for a in node.args] == ["__file__"]
                if here and (id(node) in in_functions or id(node) not in resolved):
                    unresolved.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert unresolved == []


def test_the_pages_modules_stay_short():
    """The page's own JavaScript modules too (the vendored libraries are npm's, not ours)."""
    static = ROOT / "server" / "http" / "static"
    long_modules = [
        f"{path.name}: {lines} lines"
        for path in sorted(static.glob("*.js"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert long_modules == []
