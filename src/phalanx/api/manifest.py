"""Reading manifests: multi-document YAML into JSON-shaped object dicts.

YAML is read as Kubernetes reads it (sigs.k8s.io/yaml): timestamps stay
strings, non-string keys become strings. Hostile input (alias bombs,
recursive aliases, huge documents, deep nesting) is refused with a clear
error instead of exhausting memory or the stack.
"""
from __future__ import annotations

import datetime
import math
from typing import Any

import orjson
import yaml

from phalanx.objects.errors import BadRequest, json_type_name

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024  # the apiserver's request size limit
MAX_TEXT_BYTES = 32 * 1024 * 1024
MAX_ALIAS_EXPANSION = 100_000  # nodes a document may reach through aliases
MAX_DEPTH = 64  # nesting levels; real objects need about 15
MAX_NODES = 1_000_000  # values in one object after alias expansion

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """SafeLoader without implicit timestamps: ``2024-01-01`` stays a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


class ManifestError(BadRequest):
    """A manifest that cannot be read; the message names the source and where."""

    def __init__(self, message: str, *, source: str = "<stdin>", line: int | None = None,
                 column: int | None = None, document: int | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.line = line
        self.column = column
        self.loc: tuple[Any, ...] = ()
        self.value_type = "object"
        self.document = document


class ShapeError(ValueError):
    """A value that has no JSON form (or is too deep or too big); ``path`` says where."""

    def __init__(self, path: str, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.detail = message
        self.line = line
        self.column = column
        self.loc: tuple[Any, ...] = ()
        self.value_type = "object"


def load_manifests(text: str | bytes, source: str = "<stdin>") -> list[dict[str, Any]]:
    """Every object in ``text``: empty documents skipped, ``kind: List`` expanded.

    Each object is a mapping with string ``apiVersion`` and ``kind``;
    anything else raises ManifestError naming the document and its line.
    """
    out: list[dict[str, Any]] = []
    for index, line, data in _documents(text, source):
        where = f"error parsing {source}: document {index} (line {line})"
        out.extend(_objects(data, where, source, line, index))
    return out


def load_document(text: str | bytes, source: str = "the request body") -> Any:
    """The one YAML (or JSON) document in ``text`` (None when empty), read with
    the same guards as ``load_manifests`` (alias bombs, recursion, depth, size,
    duplicate keys, timestamps kept as strings): for request bodies."""
    found: list[Any] = []
    for index, line, data in _documents(text, source):
        if found:
            raise ManifestError(f"error parsing {source}: document {index} (line {line}): expected a single "
                                f"document", source=source, line=line, document=index)
        found.append(data)
    return found[0] if found else None


def _documents(text: str | bytes, source: str) -> Any:
    """(index, line, JSON-shaped data) of every non-empty document, guarded."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ManifestError(f"error parsing {source}: not UTF-8 text (byte {e.start})", source=source) from None
    if len(text) > MAX_TEXT_BYTES:
        raise ManifestError(f"error parsing {source}: input is larger than {MAX_TEXT_BYTES // 2**20} MiB",
                            source=source)
    loader = _Loader(text)
    index = 0
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
            except yaml.MarkedYAMLError as e:
                raise _syntax_error(e, source) from None
            index += 1
            if node is None:
                continue
            line = node.start_mark.line + 1
            where = f"error parsing {source}: document {index} (line {line})"
            size = node.end_mark.index - node.start_mark.index
            if size > MAX_DOCUMENT_BYTES:
                raise ManifestError(f"{where}: document is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB",
                                    source=source, line=line, document=index)
            try:
                _check_aliases(node)
            except ShapeError as e:
                if e.line is not None:
                    raise ManifestError(f"error parsing {source}: line {e.line}, column {e.column}: {e.detail}",
                                        source=source, line=e.line, column=e.column, document=index) from None
                raise ManifestError(f"{where}: {e.detail}", source=source, line=line, document=index) from None
            try:
                data = loader.construct_document(node)
            except yaml.MarkedYAMLError as e:
                raise _syntax_error(e, source) from None
            except ValueError as e:  # e.g. an integer with more digits than Python converts
                raise ManifestError(f"{where}: {e}", source=source, line=line, document=index) from None
            if data is None:
                continue
            try:
                data = normalize_json(data, strip_nulls=False)
            except ShapeError as e:
                raise ManifestError(f"{where}: {e}", source=source, line=line, document=index) from None
            yield index, line, data
    except RecursionError:
        raise ManifestError(f"error parsing {source}: document {index + 1}: nesting too deep",
                            source=source, document=index + 1) from None
    except yaml.reader.ReaderError as e:  # control characters, bad encoding
        line = text.count("\n", 0, e.position) + 1
        column = e.position - (text.rfind("\n", 0, e.position) + 1) + 1
        char = f"#x{e.character:04x}" if isinstance(e.character, int) else repr(e.character)
        raise ManifestError(f"error parsing {source}: line {line}, column {column}: unacceptable character "
                            f"{char}: {e.reason}", source=source, line=line, column=column) from None
    except yaml.YAMLError as e:
        raise ManifestError(f"error parsing {source}: {e}", source=source) from None
    finally:
        loader.dispose()


def _objects(data: Any, where: str, source: str, line: int, index: int) -> list[dict[str, Any]]:
    def fail(msg: str) -> ManifestError:
        return ManifestError(f"{where}: {msg}", source=source, line=line, document=index)

    if not isinstance(data, dict):
        raise fail(f"expected a mapping with apiVersion and kind, got {_json_type(data)}")
    missing = [f"{k} not set" for k in ("apiVersion", "kind") if not isinstance(data.get(k), str) or not data.get(k)]
    if missing:
        raise fail(", ".join(missing))
    if data["kind"] != "List" and not data["kind"].endswith("List"):
        return [data]
    items = data.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise fail(f"items: expected a list, got {_json_type(items)}")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise fail(f"items[{i}]: expected a mapping with apiVersion and kind, got {_json_type(item)}")
        missing = [f"{k} not set" for k in ("apiVersion", "kind") if not isinstance(item.get(k), str) or not item.get(k)]
        if missing:
            raise fail(f"items[{i}]: " + ", ".join(missing))
        out.append(item)
    return out


def _syntax_error(e: yaml.MarkedYAMLError, source: str) -> ManifestError:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or e.context or "invalid YAML"
    if mark is None:
        return ManifestError(f"error parsing {source}: {problem}", source=source)
    line, column = mark.line + 1, mark.column + 1
    return ManifestError(f"error parsing {source}: line {line}, column {column}: {problem}",
                         source=source, line=line, column=column)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_aliases(root: yaml.Node) -> None:
    """Refuse recursive aliases and documents that aliases blow up (the
    "billion laughs"): the expanded size is computed on the node graph,
    where an alias is a shared node, in time linear in the text."""
    size: dict[int, int] = {}
    depth_of: dict[int, int] = {id(root): 1}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        nid = id(node)
        if finished:
            open_nodes.discard(nid)
            size[nid] = 1 + sum(size[id(c)] for c in _children(node))
            continue
        if nid in size:
            continue
        if nid in open_nodes:
            raise ShapeError("", "recursive YAML alias (an anchor used inside itself)")
        open_nodes.add(nid)
        stack.append((node, True))
        d = depth_of.get(nid, 1)
        if d > MAX_DEPTH + 1:
            raise ShapeError("", f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            _check_duplicate_keys(node)
        for c in _children(node):
            cid = id(c)
            if cid in open_nodes:
                raise ShapeError("", "recursive YAML alias (an anchor used inside itself)")
            if cid not in size:
                depth_of[cid] = d + 1
                stack.append((c, False))
    total = size[id(root)]
    if total > len(size) and total > MAX_ALIAS_EXPANSION:
        raise ShapeError("", f"YAML aliases expand this document to {total} values "
                             f"(at most {MAX_ALIAS_EXPANSION} allowed)")


def _check_duplicate_keys(node: yaml.MappingNode) -> None:
    """A key given twice is an error, as in kubectl (not "last one wins")."""
    seen: dict[str, yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        first = seen.get(key.value)
        if first is not None:
            raise ShapeError("", f'mapping key "{key.value}" already defined at line {first.start_mark.line + 1}',
                             line=key.start_mark.line + 1, column=key.start_mark.column + 1)
        seen[key.value] = key


def _json_type(v: Any) -> str:
    """The JSON type name (as the apiserver says it), in YAML words for containers."""
    name = json_type_name(v)
    return {"object": "a mapping", "array": "a list"}.get(name, name)


class SharedDict(dict):
    """A dict that can be weakly referenced: the top level of a decoded object
    shared read-only between watchers (phalanx.store.decode.SharedEvent)."""

    __slots__ = ("__weakref__",)


class _NotPlain(Exception):
    """The fast copy met something it does not handle: take the full walk."""


def _plain_copy(value: Any, strip_nulls: bool, max_depth: int, max_nodes: int) -> Any:
    """``normalize_json`` for what nearly every write is (decoded JSON: dicts
    with string keys, lists, strings, bools, small ints, finite floats, None),
    without tracking where it is; raises _NotPlain on anything else, and on
    anything the full walk would refuse, so that the full walk says why."""
    count = 0
    _str, _bool, _int, _float, _dict, _list = str, bool, int, float, dict, list
    _shared_dict = SharedDict
    isfinite = math.isfinite

    def walk(v: Any, depth: int) -> Any:
        nonlocal count
        count += 1
        if depth > max_depth or count > max_nodes:
            raise _NotPlain
        t = type(v)
        if t is _str or t is _bool or v is None:
            return v
        if t is _dict or t is _shared_dict:
            out: dict[str, Any] = {}
            d = depth + 1
            for k, item in v.items():
                if type(k) is not _str:
                    raise _NotPlain
                if item is None:
                    if strip_nulls:
                        continue
                    if d > max_depth:
                        raise _NotPlain
                    count += 1
                    out[k] = None
                    continue
                t2 = type(item)
                if t2 is _str or t2 is _bool:  # the common leaf, inline
                    if d > max_depth:
                        raise _NotPlain
                    count += 1
                    out[k] = item
                else:
                    out[k] = walk(item, d)
            return out
        if t is _list:
            return [walk(item, depth + 1) for item in v]
        if t is _int:
            if v.bit_length() > 1024:
                raise _NotPlain
            return v
        if t is _float:
            if not isfinite(v):
                raise _NotPlain
            return v
        raise _NotPlain

    out = walk(value, 0)
    if count > max_nodes:
        raise _NotPlain
    return out


# orjson refuses what these name (and subclasses of str, int, dict, list), so that only
# plain JSON values pass its round trip; what it refuses the walks below look at.
_ROUND_TRIP = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _round_trip(value: dict, max_depth: int, max_nodes: int, strip_nulls: bool = True) -> Any:
    """``_plain_copy``'s result through orjson (C), or None where it might differ:
    a value orjson refuses (non-string keys, integers past 64 bits, other types),
    a null to strip (``strip_nulls``), a value orjson writes as null that is not
    one (NaN and the infinities, which admission refuses: found by comparing the
    copy with the original, in C), more brackets than ``max_depth`` (so the
    nesting cannot be deeper), more bytes than ``max_nodes`` (so the values
    cannot be more). UUIDs and enums, which orjson writes natively, become what
    it writes for them, as they would be if a client sent them over HTTP (where
    there is no null to check)."""
    try:
        raw = orjson.dumps(value, option=_ROUND_TRIP)
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(raw) > max_nodes or raw.count(b"{") + raw.count(b"[") > max_depth:
        return None
    out = orjson.loads(raw)
    if b"null" in raw and (strip_nulls or out != value):
        return None
    return out


def normalize_json(value: Any, *, strip_nulls: bool = True, max_depth: int = MAX_DEPTH,
                   max_nodes: int = MAX_NODES) -> Any:
    """A fresh JSON-shaped copy of ``value``: string keys, finite numbers,
    datetimes as RFC 3339 strings; with ``strip_nulls`` a null field is
    treated as absent (as the apiserver prunes nulls). Raises ShapeError,
    whose ``loc`` is the tuple of keys and indexes leading to the culprit.
    """
    if value.__class__ is dict:
        out = _round_trip(value, max_depth, max_nodes, strip_nulls)
        if out is not None:
            return out
    try:
        return _plain_copy(value, strip_nulls, max_depth, max_nodes)
    except (_NotPlain, RecursionError):
        pass
    budget = [max_nodes]
    loc: list[Any] = []

    def fail(message: str, culprit: Any) -> ShapeError:
        err = ShapeError(_short(_loc_path(loc)), message)
        err.loc = tuple(loc)
        err.value_type = _json_type(culprit).replace("a mapping", "object").replace("a list", "array")
        return err

    def walk(v: Any) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise fail(f"object has more than {max_nodes} values", v)
        if len(loc) > max_depth:
            raise fail(f"nesting deeper than {max_depth} levels", v)
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            if v.bit_length() > 1024:
                raise fail("integer is too large", v)
            return int(v)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise fail(f"{v} is not a valid number", v)
            return v
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, item in v.items():
                key = _key(k, loc, fail)
                if item is None and strip_nulls:
                    continue
                loc.append(key)
                out[key] = walk(item)
                loc.pop()
            return out
        if isinstance(v, (list, tuple)):
            items = []
            for i, item in enumerate(v):
                loc.append(i)
                items.append(walk(item))
                loc.pop()
            return items
        if isinstance(v, datetime.datetime):
            if v.tzinfo is not None:
                v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return v.isoformat(timespec="seconds") + "Z"
        if isinstance(v, datetime.date):
            return v.isoformat()
        if isinstance(v, (bytes, bytearray)):
            raise fail("binary values are not supported", v)
        raise fail(f"unsupported value of type {type(v).__name__}", v)

    return walk(value)


def _key(k: Any, loc: list[Any], fail: Any) -> str:
    # sigs.k8s.io/yaml turns scalar keys into their JSON text.
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        return str(k)
    if isinstance(k, float) and math.isfinite(k):
        return repr(k)
    if k is None:
        return "null"
    raise fail(f"mapping keys must be strings, got {_json_type(k)}", k)


def _loc_path(loc: list[Any] | tuple[Any, ...]) -> str:
    out = ""
    for el in loc:
        out += f"[{el}]" if isinstance(el, int) else (f".{el}" if out else str(el))
    return out


def _short(path: str, limit: int = 120) -> str:
    return path if len(path) <= limit else path[:limit] + "..."
