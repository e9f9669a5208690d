"""Reading and rewriting the files a resource repository is made of: JSON, YAML and Markdown.

A JSON or YAML file holds one object or a list of objects; a Markdown file holds one object as YAML
front matter between ``---`` lines, its body becoming the property ``text``. An object may state its
``type`` and ``id``; otherwise the type is the parent folder's name and the id the file's stem (a
list's objects must state their ids). ``README.md`` files and hidden files or folders are skipped.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from phasegraph.tools.resources.errors import ResourceError

#: File suffixes the loader reads, and the format each stands for.
FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".md": "markdown"}
#: Names that document a folder rather than describe a resource.
SKIPPED_NAMES = {"readme.md"}
#: What a type or an id may look like (it is part of a URI, so no upper case, no spaces).
NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
#: Keys that address a resource rather than describe it.
ADDRESS_KEYS = ("type", "id")
FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(?P<meta>.*?)^---[ \t]*(?:\r?\n|\Z)(?P<body>.*)\Z", re.S | re.M)
#: The C loader is several times faster; it is absent only where PyYAML was built without libyaml.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Invalid(ValueError):
    """A problem with a file's content, named in the ResourceError together with the file."""


@dataclass(frozen=True)
class Record:
    """One object read from a file, and where it sits there so a change can be written back."""

    type: str
    id: str
    properties: dict[str, Any] = field(hash=False)
    source: str  # the file, relative to the repository folder (POSIX separators)
    stated: tuple[str, ...] = ()  # which of type/id the object spelled out, kept when it is rewritten
    in_list: bool = False  # the file holds a list of objects

    @property
    def uri(self) -> str:
        """``res://<type>/<id>``."""
        return f"res://{self.type}/{self.id}"


def read_folder(folder: Path) -> list[Record]:
    """Read every resource file under ``folder``, in a stable (sorted) order.

    A folder with no resource file gives no records: an empty repository is a valid world to search
    (and find nothing in).

    Raises:
        ResourceError: The folder is missing, or a file is invalid.
    """
    if not folder.is_dir():
        raise ResourceError(f"resource folder {folder.name!r} does not exist or is not a folder")
    return [record for path in _resource_files(folder) for record in read_file(folder, path)]


def _resource_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue  # editors' swap files, .git and our own half-written temporary files
        if path.is_file() and path.suffix.lower() in FORMATS and path.name.lower() not in SKIPPED_NAMES:
            yield path


def read_file(folder: Path, path: Path) -> list[Record]:
    """The resources in one file; every problem is reported with the file's relative name."""
    source = path.relative_to(folder).as_posix()
    try:
        objects, in_list = _parse(FORMATS[path.suffix.lower()], _read(path))
        default_type = path.parent.name if path.parent != folder else None
        return [_record(obj, n, source, default_type, path.stem, in_list) for n, obj in enumerate(objects)]
    except _Invalid as exc:
        raise ResourceError(f"{source}: {exc}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _Invalid("not UTF-8 text") from None
    except OSError as exc:
        raise _Invalid(f"cannot be read ({exc.strerror or type(exc).__name__})") from None


def _parse(kind: str, text: str) -> tuple[list[dict[str, Any]], bool]:
    """The file's objects, and whether they came as a list."""
    if kind == "markdown":
        meta, body = _split_markdown(text)
        if "text" in meta:
            raise _Invalid("front matter must not set 'text': the body is the text")
        return [{**meta, "text": body.strip()}], False
    data = _load_json(text) if kind == "json" else _load_yaml(text)
    if isinstance(data, dict):
        return [_checked_keys(data)], False
    if isinstance(data, list) and data and all(isinstance(item, dict) for item in data):
        return [_checked_keys(item) for item in data], True
    if data is None or data == []:
        raise _Invalid("holds no object")
    raise _Invalid(f"expected an object or a list of objects, found {_kind_of(data)}")


def _split_markdown(text: str) -> tuple[dict[str, Any], str]:
    found = FRONT_MATTER.match(text)
    if found is None:
        raise _Invalid("no front matter: a Markdown resource starts with YAML between two '---' lines")
    meta = _load_yaml(found["meta"]) or {}
    if not isinstance(meta, dict):
        raise _Invalid(f"front matter must be a mapping, found {_kind_of(meta)}")
    return _checked_keys(meta), found["body"]


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Invalid(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_LOADER)  # a safe loader, C or pure Python
    except yaml.MarkedYAMLError as exc:
        where = f" (line {exc.problem_mark.line + 1})" if exc.problem_mark else ""
        raise _Invalid(f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise _Invalid(f"not valid YAML: {exc}") from None


def _checked_keys(obj: dict[Any, Any]) -> dict[str, Any]:
    odd = [key for key in obj if not isinstance(key, str) or not key.strip()]
    if odd:
        raise _Invalid(f"property names must be non-empty text, found {odd[0]!r}")
    return obj


def _kind_of(data: Any) -> str:
    return "a list of mixed values" if isinstance(data, list) else type(data).__name__


def _record(
    obj: dict[str, Any], position: int, source: str, default_type: str | None, stem: str, in_list: bool
) -> Record:
    where = f"object {position + 1}: " if in_list else ""
    if "uri" in obj:
        raise _Invalid(f"{where}'uri' must not be set: it is made of 'type' and 'id'")
    if "type" not in obj and default_type is None:
        raise _Invalid(f"{where}no 'type' (a file at the top of the folder must state its type)")
    if "id" not in obj and in_list:
        raise _Invalid(f"{where}no 'id' (each object of a list must state its own)")
    type_ = _checked_name("type", obj.get("type", default_type), where, "type" not in obj)
    id_ = _checked_name("id", obj.get("id", stem), where, "id" not in obj)
    properties = {key: value for key, value in obj.items() if key not in ADDRESS_KEYS}
    stated = tuple(key for key in ADDRESS_KEYS if key in obj)
    return Record(type_, id_, properties, source, stated, in_list)


def _checked_name(label: str, value: Any, where: str, derived: bool) -> str:
    if isinstance(value, str) and NAME.fullmatch(value):
        return value
    origin = f" (from the {'folder' if label == 'type' else 'file'} name)" if derived else ""
    raise _Invalid(
        f"{where}{label} {value!r}{origin} must be lower-case letters, digits, '-' or '_', "
        "starting with a letter or a digit"
    )


def write_record(folder: Path, record: Record) -> None:
    """Rewrite ``record``'s object in its file; the file's other objects (or Markdown body) are kept.

    The file is read again, so another object changed on disk meanwhile is not lost, and replaced
    atomically, so a reader never sees half a file.

    Raises:
        ResourceError: The file cannot be read, parsed or written, or no longer holds the object.
    """
    path = folder / record.source
    try:
        text = _read(path)
        kind = FORMATS[path.suffix.lower()]
        _replace_file(path, _markdown(text, record) if kind == "markdown" else _data_file(kind, text, record))
    except _Invalid as exc:
        raise ResourceError(f"{record.source}: cannot write {record.uri} back: {exc}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ResourceError(f"{record.source}: cannot write {record.uri} back ({reason})") from None


def _object(record: Record, without: tuple[str, ...] = ()) -> dict[str, Any]:
    """The object as the file spells it: type and id only when the file stated them."""
    address = {key: record.type if key == "type" else record.id for key in record.stated}
    return {**address, **{k: v for k, v in record.properties.items() if k not in without}}


def _data_file(kind: str, text: str, record: Record) -> str:
    data: Any = _object(record)
    if record.in_list:
        data = _load_json(text) if kind == "json" else _load_yaml(text)
        at = _position(data, record)
        data[at] = _object(record)
    if kind == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return _dump_yaml(data)


def _position(data: Any, record: Record) -> int:
    address = (record.type, record.id)
    for at, item in enumerate(data if isinstance(data, list) else []):
        # an object without its own type has the record's (the folder's) type
        if isinstance(item, dict) and (item.get("type", record.type), item.get("id")) == address:
            return at
    raise _Invalid(f"the file no longer holds an object with id {record.id!r}")


def _markdown(text: str, record: Record) -> str:
    _, body = _split_markdown(text)
    new_text = str(record.properties.get("text", ""))
    if new_text != body.strip():
        body = new_text + "\n"
    return f"---\n{_dump_yaml(_object(record, without=('text',)))}---\n{body}"


def _dump_yaml(data: Any) -> str:
    dumped: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return dumped


def _replace_file(path: Path, text: str) -> None:
    # The temporary name starts with a dot, so a loader running meanwhile skips it.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, path.stat().st_mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
