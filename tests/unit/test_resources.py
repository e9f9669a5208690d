"""The resource repository: loading, FTS5 search, mutations, write-back, the domain tools and threads."""

import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bench.resources import generate_world
from phasegraph.tools import ToolContext, ToolRunner
from phasegraph.tools.errors import ToolError
from phasegraph.tools.resources import (
    RESOURCE_TOOLS,
    ResourceError,
    ResourceNotFound,
    ResourceRepository,
    bundled_world,
    load_bundled,
    resource_registry,
)

MIRA = "res://character/mira-voss"
TAMSIN = "res://character/tamsin-reed"
HESK = "res://character/hesk-marrow"
COMPASS = "res://item/brass-compass"
LIGHTHOUSE = "res://place/saltmarsh-lighthouse"
BELL_CHAPTER = "res://chapter/03-the-drowned-bell"


@pytest.fixture
def repo() -> ResourceRepository:
    return load_bundled()


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A private copy of the bundled world, safe to write to."""
    return Path(shutil.copytree(bundled_world(), tmp_path / "world"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


# --- the bundled world ------------------------------------------------------------------------------


def test_the_bundled_world_loads_and_every_reference_resolves(repo: ResourceRepository):
    assert len(repo) >= 34
    assert repo.types() == ["chapter", "character", "item", "place"]
    counts = {t: sum(uri.startswith(f"res://{t}/") for uri in repo.uris()) for t in repo.types()}
    assert 8 <= counts["character"] <= 9 and counts["place"] == 8
    assert 8 <= counts["chapter"] <= 9 and counts["item"] == 8
    dangling = [
        (uri, ref)
        for uri in repo.uris()
        for ref in _strings(repo.get(uri).properties)
        if ref.startswith("res://") and ref not in repo
    ]
    assert dangling == []
    assert not any(uri.endswith("/readme") for uri in repo.uris())


def test_the_resources_the_scripts_rely_on(repo: ResourceRepository):
    mira = repo.get(MIRA)
    assert mira.properties["name"] == "Mira Voss" and "the Grey Fox" in mira.properties["aliases"]
    assert "navigator" in mira.properties["role"]
    compass = repo.get(COMPASS)
    assert compass.properties["name"] == "Brass Compass"
    assert compass.properties["owner"] == TAMSIN and compass.properties["location"] == LIGHTHOUSE
    assert "lost" in compass.summary and LIGHTHOUSE in repo
    chapter = repo.get(BELL_CHAPTER)
    assert MIRA in chapter.properties["characters"] and chapter.source == "chapter/03-the-drowned-bell.md"
    assert chapter.properties["text"].count(".") >= 3 and chapter.properties["place"] in repo
    for uri in repo.uris():
        resource = repo.get(uri)
        if resource.type == "character":
            assert {"name", "aliases", "summary", "role", "home", "traits"} <= set(resource.properties)
            assert len(resource.properties["backstory"]) >= 400, uri


def test_render_is_compact_and_filtered(repo: ResourceRepository):
    mira = repo.get(MIRA)
    full = mira.render()
    assert full.splitlines()[:3] == [
        f"{MIRA} (character)",
        "  name: Mira Voss",
        "  aliases: the Grey Fox, Voss of the Needle",
    ]
    assert full == mira.render()  # deterministic
    assert len(mira.render(exclude={"backstory"})) < len(full) - 400
    assert mira.render(include={"name", "role"}, exclude={"role"}) == f"{MIRA} (character)\n  name: Mira Voss"


def test_summary_falls_back_to_the_first_line_of_the_text(tmp_path: Path):
    (tmp_path / "note").mkdir()
    long_line = "word " * 60
    (tmp_path / "note" / "a.md").write_text(f"---\nname: A\n---\n\n{long_line}\nsecond line\n", "utf-8")
    summary = ResourceRepository.load(tmp_path).get("res://note/a").summary
    assert len(summary) <= 120 and summary.startswith("word word") and summary.endswith("…")


def test_load_bundled_gives_fresh_read_only_repositories():
    first, second = load_bundled(), load_bundled()
    first.set_property(MIRA, "role", "harbour master")
    assert not first.writable
    assert second.get(MIRA).properties["role"] == "ship's navigator"


# --- search -----------------------------------------------------------------------------------------


def test_an_alias_ranks_above_words_in_a_body(repo: ResourceRepository):
    hits = repo.search("Grey Fox")
    uris = [hit.uri for hit in hits]
    assert uris[0] == MIRA
    assert HESK in uris[1:]
    ranks = [hit.rank for hit in hits]
    assert ranks == sorted(ranks) and ranks[0] < ranks[uris.index(HESK)]
    assert "[Grey]" in hits[0].snippet and hits[0].type == "character"


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("Mira's", MIRA),
        ('"mira', MIRA),
        ("brass* -compass: AND", COMPASS),
        ("saltmarsh: lighthouse*", LIGHTHOUSE),
        ("Grey OR", MIRA),
    ],
)
def test_hostile_queries_are_plain_words(repo: ResourceRepository, query: str, first: str):
    assert repo.search(query)[0].uri == first


@pytest.mark.parametrize(
    "query", ["NEAR AND OR", "***", '"unterminated', "(", "'; DROP TABLE resources; --", "_"]
)
def test_queries_that_match_little_or_nothing_do_not_raise(repo: ResourceRepository, query: str):
    assert isinstance(repo.search(query), list)
    assert repo.search("***") == []


def test_diacritics_are_folded(tmp_path: Path):
    (tmp_path / "place").mkdir()
    (tmp_path / "place" / "cafe.yaml").write_text("name: Café Noël\n", "utf-8")
    assert [hit.uri for hit in ResourceRepository.load(tmp_path).search("cafe noel")] == ["res://place/cafe"]


@pytest.mark.parametrize(("query", "limit"), [("", 10), ("   ", 10), ("mira", 0)])
def test_blank_queries_and_bad_limits_are_refused(repo: ResourceRepository, query: str, limit: int):
    with pytest.raises(ResourceError):
        repo.search(query, limit=limit)


def test_search_limits_and_filters_by_type(repo: ResourceRepository):
    assert len(repo.search("the", limit=3)) == 3
    hits = repo.search("compass", types=["chapter"])
    assert hits and {hit.type for hit in hits} == {"chapter"}
    assert repo.search("compass", types=[]) == []


# --- loading errors ---------------------------------------------------------------------------------

BAD_FILES = {
    "broken yaml": (
        {"character/broken.yaml": "name: [unclosed\n"},
        "character/broken.yaml",
        "not valid YAML",
    ),
    "broken json": ({"item/broken.json": '{"name": '}, "item/broken.json", "not valid JSON"),
    "duplicate uri": (
        {"character/a.yaml": "name: A\n", "character/b.yaml": "id: a\nname: B\n"},
        "character/b.yaml",
        "duplicate uri res://character/a (also in character/a.yaml)",
    ),
    "bad id from the file name": (
        {"character/Mira Voss.yaml": "name: M\n"},
        "character/Mira Voss.yaml",
        "id 'Mira Voss'",
    ),
    "bad stated id": ({"character/m.yaml": "id: Mira\n"}, "character/m.yaml", "id 'Mira'"),
    "bad type": ({"place/p.json": '{"type": "Place!"}'}, "place/p.json", "type 'Place!'"),
    "missing front matter": ({"chapter/01.md": "# Title\n\nBody.\n"}, "chapter/01.md", "no front matter"),
    "text in front matter": (
        {"chapter/01.md": "---\ntext: x\n---\nBody\n"},
        "chapter/01.md",
        "must not set 'text'",
    ),
    "list without ids": (
        {"item/things.json": '[{"id": "a"}, {"name": "b"}]'},
        "item/things.json",
        "object 2: no 'id'",
    ),
    "scalar": ({"item/n.json": "42"}, "item/n.json", "expected an object or a list of objects"),
    "empty yaml": ({"place/empty.yaml": ""}, "place/empty.yaml", "holds no object"),
    "top-level without type": ({"loose.yaml": "name: L\n"}, "loose.yaml", "no 'type'"),
    "uri stated": ({"place/u.yaml": "uri: res://place/x\n"}, "place/u.yaml", "'uri' must not be set"),
    "not utf-8": ({"place/latin.yaml": b"name: caf\xe9\n"}, "place/latin.yaml", "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_is_named_relative_to_the_folder(tmp_path: Path, case: str):
    files, name, fragment = BAD_FILES[case]
    folder = tmp_path / "world"
    for relative, content in {"place/good.yaml": "name: Good\n", **files}.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ResourceError) as raised:
        ResourceRepository.load(folder)
    message = str(raised.value)
    assert message.startswith(f"{name}: ") and fragment in message
    assert str(tmp_path) not in message
    assert isinstance(raised.value, ToolError)


def test_a_missing_folder_is_an_error_and_an_empty_one_an_empty_repository(tmp_path: Path):
    with pytest.raises(ResourceError, match="does not exist") as raised:
        ResourceRepository.load(tmp_path / "nowhere")
    assert str(tmp_path) not in str(raised.value)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Not a resource\n", "utf-8")
    (tmp_path / "notes.txt").write_text("ignored", "utf-8")
    empty = ResourceRepository.load(tmp_path, writable=True)
    assert len(empty) == 0 and empty.uris() == [] and empty.types() == []
    assert empty.search("anything at all") == []
    with pytest.raises(ResourceNotFound):
        empty.add_note("res://chapter/one", "a note")


def test_readme_and_hidden_files_are_skipped_and_defaults_come_from_the_path(tmp_path: Path):
    (tmp_path / "place" / ".cache").mkdir(parents=True)
    (tmp_path / "place" / "README.md").write_text("no front matter here\n", "utf-8")
    (tmp_path / "place" / ".draft.yaml").write_text("name: [broken\n", "utf-8")
    (tmp_path / "place" / ".cache" / "x.json").write_text("{", "utf-8")
    (tmp_path / "place" / "quay.yml").write_text("name: Quay\n", "utf-8")
    (tmp_path / "top.json").write_text(
        '[{"type": "item", "id": "rope"}, {"type": "item", "id": "net"}]', "utf-8"
    )
    repo = ResourceRepository.load(tmp_path)
    assert repo.uris() == ["res://item/net", "res://item/rope", "res://place/quay"]
    assert repo.get("res://item/rope").source == "top.json"


# --- mutations --------------------------------------------------------------------------------------


def test_a_new_alias_is_found_by_search(repo: ResourceRepository):
    assert not any(hit.uri == MIRA for hit in repo.search("Tidereader"))
    before = repo.get(MIRA)
    after = repo.set_property(MIRA, "aliases", [*before.properties["aliases"], "the Tidereader"])
    assert repo.search("Tidereader")[0].uri == MIRA
    assert repo.get(MIRA) == after and "the Tidereader" not in before.properties["aliases"]
    assert repo.version == 1


def test_a_changed_property_leaves_the_old_words(repo: ResourceRepository):
    repo.set_property(HESK, "backstory", "He keeps bees now.")
    assert HESK not in [hit.uri for hit in repo.search("Grey Fox")]
    assert repo.search("bees")[0].uri == HESK


def test_notes_are_appended(repo: ResourceRepository):
    repo.add_note(BELL_CHAPTER, "  The bell rings before storms.  ")
    resource = repo.add_note(BELL_CHAPTER, "Check the clapper's weight.")
    assert resource.properties["notes"] == ["The bell rings before storms.", "Check the clapper's weight."]
    assert repo.search("clapper's weight")[0].uri == BELL_CHAPTER
    assert repo.version == 2


@pytest.mark.parametrize(
    ("call", "error", "fragment"),
    [
        (lambda r: r.set_property(MIRA, "type", "place"), ResourceError, "'type' cannot be changed"),
        (lambda r: r.set_property(MIRA, " id ", "x"), ResourceError, "'id' cannot be changed"),
        (lambda r: r.set_property(MIRA, "", "x"), ResourceError, "property name is empty"),
        (lambda r: r.set_property(MIRA, "when", object()), ResourceError, "not object"),
        (lambda r: r.add_note(BELL_CHAPTER, "  "), ResourceError, "note is empty"),
        (lambda r: r.add_note("res://chapter/03-the-drowned-bel", "x"), ResourceNotFound, BELL_CHAPTER),
        (lambda r: r.get("res://character/mira-vos"), ResourceNotFound, f"did you mean {MIRA}"),
        (lambda r: r.get("mira"), ResourceNotFound, "res://<type>/<id>"),
    ],
)
def test_refused_changes_leave_the_repository_unchanged(repo: ResourceRepository, call, error, fragment):
    with pytest.raises(error) as raised:
        call(repo)
    assert fragment in str(raised.value)
    assert repo.version == 0 and repo.get(MIRA).properties["name"] == "Mira Voss"


def test_a_writable_repository_writes_each_change_back(world: Path):
    chapter_file = world / "chapter" / "03-the-drowned-bell.md"
    body = chapter_file.read_text("utf-8").split("\n---\n", 1)[1]
    relics_before = ResourceRepository.load(world).get("res://item/keepers-lens")
    repo = ResourceRepository.load(world, writable=True)
    repo.set_property(MIRA, "role", "first mate")
    repo.set_property("res://item/widows-spyglass", "location", LIGHTHOUSE)
    repo.set_property("res://item/forged-chart", "owner", MIRA)
    repo.add_note(BELL_CHAPTER, "Aldous hears it too.")

    again = ResourceRepository.load(world)
    assert again.get(MIRA).properties["role"] == "first mate"
    assert again.get(MIRA).properties["backstory"] == repo.get(MIRA).properties["backstory"]
    assert again.get("res://item/widows-spyglass").properties["location"] == LIGHTHOUSE
    assert again.get("res://item/keepers-lens") == relics_before  # the list's other objects are kept
    assert again.get("res://item/forged-chart").properties["owner"] == MIRA
    assert again.get(BELL_CHAPTER).properties["notes"] == ["Aldous hears it too."]
    assert chapter_file.read_text("utf-8").endswith(body)  # the Markdown body is kept as it was
    assert [p.name for p in world.rglob(".*")] == []  # no temporary file is left behind


def test_a_changed_markdown_text_replaces_the_body(world: Path):
    repo = ResourceRepository.load(world, writable=True)
    repo.set_property(BELL_CHAPTER, "text", "A shorter chapter.")
    assert ResourceRepository.load(world).get(BELL_CHAPTER).properties["text"] == "A shorter chapter."


def test_a_read_only_repository_never_touches_its_files(world: Path):
    before = _snapshot(world)
    repo = ResourceRepository.load(world)
    repo.set_property(MIRA, "role", "first mate")
    repo.add_note(BELL_CHAPTER, "a note")
    repo.set_property("res://item/tidewarden-ledger", "location", LIGHTHOUSE)
    assert _snapshot(world) == before
    assert repo.get(MIRA).properties["role"] == "first mate"


def test_the_bundled_files_stay_untouched():
    before = _snapshot(bundled_world())
    repo = load_bundled()
    repo.set_property(COMPASS, "location", "res://place/old-carrow")
    assert _snapshot(bundled_world()) == before


# --- domain tools -----------------------------------------------------------------------------------


@pytest.fixture
def runner(tmp_path: Path, repo: ResourceRepository) -> ToolRunner:
    return ToolRunner(resource_registry(), ToolContext(workspace=tmp_path, project_id="p", resources=repo))


async def test_set_resource_property_reports_old_and_new(runner: ToolRunner, repo: ResourceRepository):
    result = await runner.run(
        "set_resource_property",
        {"uri": " RES://Character/Mira-Voss ", "property": "role", "value": "first mate"},
    )
    assert result.status == "ok"
    assert result.output == f"{MIRA}: role \"ship's navigator\" -> 'first mate'"
    assert repo.get(MIRA).properties["role"] == "first mate"


async def test_add_chapter_note(runner: ToolRunner, repo: ResourceRepository):
    result = await runner.run(
        "add_chapter_note", {"chapter_uri": BELL_CHAPTER, "note": "Foreshadow the storm."}
    )
    assert (
        result.status == "ok"
        and result.output == f"{BELL_CHAPTER}: notes 0 -> 1; added 'Foreshadow the storm.'"
    )
    assert repo.get(BELL_CHAPTER).properties["notes"] == ["Foreshadow the storm."]


async def test_move_item_to_a_place_or_a_character(runner: ToolRunner, repo: ResourceRepository):
    moved = await runner.run("move_item", {"item_uri": COMPASS, "to_uri": "res://place/old-carrow"})
    assert moved.output == f"{COMPASS}: location '{LIGHTHOUSE}' -> 'res://place/old-carrow'"
    given = await runner.run("move_item", {"item_uri": COMPASS, "to_uri": MIRA})
    assert given.output == f"{COMPASS}: owner '{TAMSIN}' -> '{MIRA}'"
    assert repo.get(COMPASS).properties["owner"] == MIRA


@pytest.mark.parametrize(
    ("name", "args", "fragment"),
    [
        ("set_resource_property", {"uri": MIRA, "property": "id", "value": "x"}, "'id' cannot be changed"),
        ("set_resource_property", {"uri": "res://character/mira", "property": "role", "value": "x"}, MIRA),
        ("add_chapter_note", {"chapter_uri": MIRA, "note": "x"}, "is a character, not a chapter"),
        ("add_chapter_note", {"chapter_uri": BELL_CHAPTER, "note": " "}, "the note is empty"),
        (
            "move_item",
            {"item_uri": COMPASS, "to_uri": BELL_CHAPTER},
            "is a chapter: an item moves to a place",
        ),
        ("move_item", {"item_uri": MIRA, "to_uri": LIGHTHOUSE}, "not an item"),
        (
            "move_item",
            {"item_uri": "res://item/brass-compas", "to_uri": LIGHTHOUSE},
            f"did you mean {COMPASS}",
        ),
    ],
)
async def test_refusals_are_error_results(runner: ToolRunner, repo: ResourceRepository, name, args, fragment):
    result = await runner.run(name, args)
    assert result.status == "error" and fragment in result.error
    assert repo.version == 0


@pytest.mark.parametrize("name", [t.name for t in RESOURCE_TOOLS])
async def test_without_a_repository_the_tools_refuse(tmp_path: Path, name: str):
    args = {
        "set_resource_property": {"uri": MIRA, "property": "role", "value": "x"},
        "add_chapter_note": {"chapter_uri": BELL_CHAPTER, "note": "x"},
        "move_item": {"item_uri": COMPASS, "to_uri": LIGHTHOUSE},
    }[name]
    result = await ToolRunner(resource_registry(), ToolContext(tmp_path, "p")).run(name, args)
    assert result.status == "error" and "no resource repository" in result.error


def test_uri_arguments_are_normalised_in_signatures():
    registry = resource_registry()
    loose = registry.signature(
        "move_item", {"item_uri": " RES://Item/Brass-Compass", "to_uri": "res://PLACE/x "}, "p"
    )
    tight = registry.signature("move_item", {"item_uri": COMPASS, "to_uri": "res://place/x"}, "p")
    assert loose == tight


# --- threads ----------------------------------------------------------------------------------------


def test_threads_can_change_and_search_at_once(repo: ResourceRepository):
    start = threading.Barrier(8)

    def work(worker: int) -> int:
        start.wait()
        for step in range(25):
            repo.add_note(BELL_CHAPTER, f"note {worker}-{step}")
            repo.set_property(MIRA, f"mood_{worker}", f"calm {step}")
            assert repo.search("Grey Fox")[0].uri == MIRA
            assert repo.search(f"calm {step}")
        return worker

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sorted(pool.map(work, range(8))) == list(range(8))
    assert len(repo.get(BELL_CHAPTER).properties["notes"]) == 200
    assert repo.version == 400


# --- the benchmark's generator ----------------------------------------------------------------------


def test_generated_worlds_load(tmp_path: Path):
    generate_world(tmp_path / "a", 50)
    generate_world(tmp_path / "b", 50)
    repo = ResourceRepository.load(tmp_path / "a")
    assert len(repo) == 50 and len(repo.types()) >= 3
    assert _snapshot(tmp_path / "a") == _snapshot(tmp_path / "b")  # the same seed writes the same files


def test_changes_are_listed_and_replay_onto_a_fresh_copy():
    first = load_bundled()
    first.set_property(COMPASS, "owner", MIRA)
    first.add_note(BELL_CHAPTER, "Found again.")
    assert [c["op"] for c in first.changes] == ["set_property", "add_note"]
    second = load_bundled()
    second.replay(first.changes)
    assert second.get(COMPASS).properties["owner"] == MIRA
    assert second.get(BELL_CHAPTER).properties["notes"] == ["Found again."]
    assert second.changes == first.changes
    with pytest.raises(ResourceError, match="unknown operation"):
        second.replay([{"op": "delete", "uri": COMPASS}])
