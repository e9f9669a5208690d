from phasegraph.tools import canonical_signature, default_registry
from phasegraph.tools.signature import normalize_path


def test_key_order_does_not_matter_at_any_depth():
    a = canonical_signature("t", {"a": 1, "b": {"x": [1, {"p": 1, "q": 2}], "y": 2}}, "p1")
    b = canonical_signature("t", {"b": {"y": 2, "x": [1, {"q": 2, "p": 1}]}, "a": 1}, "p1")
    assert a == b


def test_whitespace_and_integral_floats_are_normalised():
    assert canonical_signature("t", {"q": "  roadmap ", "n": 1.0}, "p") == canonical_signature(
        "t", {"q": "roadmap", "n": 1}, "p"
    )
    assert canonical_signature("t", {"n": 1.5}, "p") != canonical_signature("t", {"n": 1}, "p")


def test_action_is_its_own_component_and_project_matters():
    sig = canonical_signature("db", {"action": "read", "id": 3}, "p1")
    assert sig == 'db|read|{"id":3}|p1'
    assert sig != canonical_signature("db", {"action": "write", "id": 3}, "p1")
    assert sig != canonical_signature("db", {"action": "read", "id": 3}, "p2")


def test_list_order_and_values_still_matter():
    assert canonical_signature("t", {"a": [1, 2]}, "p") != canonical_signature("t", {"a": [2, 1]}, "p")
    assert canonical_signature("t", {"a": "x"}, "p") != canonical_signature("u", {"a": "x"}, "p")


def test_file_tools_normalise_paths():
    registry = default_registry()
    assert registry.signature("read_file", {"path": "./docs/../docs/a.md"}, "p") == registry.signature(
        "read_file", {"path": "docs/a.md"}, "p"
    )
    assert registry.signature("list_files", {"path": "./"}, "p") == registry.signature(
        "list_files", {"path": "."}, "p"
    )
    assert registry.signature("read_file", {"path": "docs/a.md"}, "p") != registry.signature(
        "read_file", {"path": "docs/b.md"}, "p"
    )


def test_normalize_path_edge_cases():
    assert normalize_path("docs//a.md") == "docs/a.md"
    assert normalize_path("/docs/a.md") == "docs/a.md"
    assert normalize_path("") == "."
    assert normalize_path(7) == 7


def test_omitted_arguments_count_with_their_defaults():
    registry = default_registry()
    assert registry.signature("list_files", {}, "p") == registry.signature("list_files", {"path": "./"}, "p")
    assert registry.signature("search_files", {"query": "x"}, "p") == registry.signature(
        "search_files", {"query": "x", "path": "."}, "p"
    )
    assert registry.signature("unknown_tool", {}, "p") == "unknown_tool||{}|p"
