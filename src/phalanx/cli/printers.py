"""kubectl-style printing: `get` tables, `get -w` rows, `-o yaml|json`.

Pure functions, no I/O. Cells come from ``api.columns``; they are laid out the
way kubectl 1.32 lays them out (its tabwriter: minwidth 6, padding 3, widths
remembered across a watch).
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Iterable, Sequence

import yaml

from phalanx.api.columns import NONE, cell, columns, crd_cell, dig, dig_dict, format_labels, go_value, row
from phalanx.cli.gojson import go_escape
from phalanx.objects.quantity import parse_quantity

Obj = dict[str, Any]

# --------------------------------------------------------------------------
# Go text/tabwriter (github.com/liggitt/tabwriter, as vendored by kubectl)
# --------------------------------------------------------------------------


class TabWriter:
    """A port of Go's elastic-tabstop writer, enough for kubectl's output.

    Cells are tab-terminated; the last cell of a line is never padded. A column
    block is a run of consecutive lines that have a cell in that column, which
    is why `describe` sections align independently. With ``remember_widths``
    column widths only grow across flushes (what keeps `get -w` rows aligned).
    """

    def __init__(self, minwidth: int = 0, padding: int = 1, remember_widths: bool = False) -> None:
        self.minwidth = minwidth
        self.padding = padding
        self.remember_widths = remember_widths
        self.max_widths: list[int] = []
        self._buf: list[str] = []

    def write(self, text: str) -> None:
        self._buf.append(text)

    def flush(self) -> str:
        """Format everything written since the last flush and return it."""
        text = "".join(self._buf)
        self._buf = []
        if not text:
            return ""
        lines = [line.split("\t") for line in text.split("\n")]
        out: list[str] = []
        self._format(lines, [], 0, len(lines), out)
        return "".join(out)

    def _format(self, lines: list[list[str]], widths: list[int], line0: int, line1: int,
                out: list[str]) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            self._write_lines(lines, widths, line0, this, out)
            line0 = this
            width = self.minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + self.padding)
                this += 1
            if self.remember_widths:
                if len(self.max_widths) < len(widths):
                    self.max_widths.extend(widths[len(self.max_widths):])
                if len(self.max_widths) == column:
                    self.max_widths.append(width)
                elif self.max_widths[column] > width:
                    width = self.max_widths[column]
                else:
                    self.max_widths[column] = width
            widths.append(width)
            self._format(lines, widths, line0, this, out)
            widths.pop()
            line0 = this
        self._write_lines(lines, widths, line0, line1, out)

    @staticmethod
    def _write_lines(lines: list[list[str]], widths: list[int], line0: int, line1: int,
                     out: list[str]) -> None:
        for i in range(line0, line1):
            for j, text in enumerate(lines[i]):
                out.append(text)
                if j < len(widths):
                    out.append(" " * (widths[j] - len(text)))
            if i + 1 < len(lines):
                out.append("\n")


def escape_terminal(text: str) -> str:
    """kubectl's EscapeTerminal: user data may not drive the terminal."""
    return text.replace("\x1b", "^[").replace("\r", "\\r")


# --------------------------------------------------------------------------
# Table layout
# --------------------------------------------------------------------------

_BREAK = re.compile(r"[\f\n\r]")


def _cell_text(cell: Any) -> str:
    text = cell if isinstance(cell, str) else crd_cell(cell)
    m = _BREAK.search(text)
    if m:
        text = text[:m.start()] + "..."
    return escape_terminal(text)


def _table_lines(headers: Sequence[str] | None, rows: Iterable[Sequence[Any]]) -> str:
    parts = []
    if headers:
        parts.append("\t".join(h.upper() for h in headers) + "\n")
    for r in rows:
        parts.append("\t".join(_cell_text(c) for c in r) + "\n")
    return "".join(parts)


def _table_writer() -> TabWriter:
    return TabWriter(minwidth=6, padding=3, remember_widths=True)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Lay out a table as kubectl does: left aligned, 3 spaces between columns."""
    w = _table_writer()
    w.write(_table_lines(headers, rows))
    return w.flush()


class WatchPrinter:
    """What `kubectl get -w` prints: the header once with the first rows, then one
    line per event, column widths growing but never shrinking (kubectl keeps one
    tabwriter with RememberWidths for the whole watch)."""

    def __init__(self, kind: str, wide: bool = False, with_namespace: bool = False,
                 no_headers: bool = False) -> None:
        self.kind = kind
        self.wide = wide
        self.with_namespace = with_namespace
        self._header_done = no_headers
        self._writer = _table_writer()

    def print(self, objs: Iterable[Obj], now: datetime) -> str:
        rows = [row(o, self.kind, self.wide, now, self.with_namespace) for o in objs]
        if not rows:
            return ""
        headers = None
        if not self._header_done:
            headers = columns(self.kind, self.wide, self.with_namespace)
            self._header_done = True
        self._writer.write(_table_lines(headers, rows))
        return self._writer.flush()


def watch_row(obj: Obj, kind: str, wide: bool, now: datetime,
              widths: Sequence[int] = ()) -> tuple[str, list[int]]:
    """One `get -w` line for an event, given the widths remembered so far.

    Returns the line and the new remembered widths (pure form of WatchPrinter).
    """
    w = _table_writer()
    w.max_widths = list(widths)
    w.write(_table_lines(None, [row(obj, kind, wide, now)]))
    return w.flush(), list(w.max_widths)


# --------------------------------------------------------------------------
# -o yaml | -o json
# --------------------------------------------------------------------------


def _strip_managed_fields(obj: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if mk != "managedFields"}
            out[k] = _strip_managed_fields(v) if k in ("items",) else v
        return out
    if isinstance(obj, list):
        return [_strip_managed_fields(o) for o in obj]
    return obj


def as_list(items: Iterable[Obj]) -> Obj:
    """The `List` wrapper kubectl prints for several objects with -o yaml|json."""
    return {"apiVersion": "v1", "items": list(items), "kind": "List", "metadata": {"resourceVersion": ""}}


class _KubeDumper(yaml.SafeDumper):
    """YAML as kubectl (go-yaml v2) writes it: strings that would read back as
    another type are double-quoted, multi-line strings are literal blocks."""


# go-yaml v2 also reads these one-letter words as booleans (PyYAML does not).
_GO_YAML_BOOLS = frozenset({"y", "Y", "n", "N"})


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    tag = dumper.resolve(yaml.ScalarNode, value, (True, False))
    if tag != "tag:yaml.org,2002:str" or value in _GO_YAML_BOOLS:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _represent_float(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    if value.is_integer() and abs(value) < 1e15:
        return dumper.represent_int(int(value))
    return yaml.SafeDumper.represent_float(dumper, value)


_KubeDumper.add_representer(str, _represent_str)
_KubeDumper.add_representer(float, _represent_float)


def to_yaml(obj: Any) -> str:
    """`-o yaml`: keys sorted (so apiVersion, kind, metadata, spec, status), no managedFields."""
    return yaml.dump(_strip_managed_fields(obj), Dumper=_KubeDumper, default_flow_style=False,
                     sort_keys=True, allow_unicode=True, width=80)


def to_json(obj: Any) -> str:
    """`-o json`: 4-space indent, sorted keys, HTML characters escaped as Go does."""
    return go_escape(json.dumps(_strip_managed_fields(obj), indent=4, sort_keys=True, ensure_ascii=False)) + "\n"


# --------------------------------------------------------------------------
# -o name | -o custom-columns | --show-labels | --sort-by
# --------------------------------------------------------------------------


def object_name(obj: Obj) -> str:
    """`-o name` and `kind/name` table cells: ``pod/x``, ``pytorchjob.kubeflow.org/x``."""
    kind = cell(obj.get("kind")).lower()
    api_version = cell(obj.get("apiVersion"))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return f"{kind}{'.' + group if group else ''}/{cell(dig(obj, 'metadata', 'name'))}"


def with_kind_names(rows: list[list[str]], objs: Sequence[Obj], with_namespace: bool) -> list[list[str]]:
    """Table rows whose NAME cell is ``kind/name`` (what kubectl prints when several kinds are listed)."""
    i = 1 if with_namespace else 0
    return [r[:i] + [object_name(o)] + r[i + 1:] for r, o in zip(rows, objs)]


def add_labels_column(headers: list[str], rows: list[list[str]], objs: Sequence[Obj]) -> tuple[list[str], list]:
    """`--show-labels`: a LABELS column (sorted ``k=v`` pairs) at the end."""
    return headers + ["LABELS"], [r + [format_labels(dig_dict(o, "metadata", "labels"))] for r, o in zip(rows, objs)]


def go_print(v: Any) -> str:
    """A decoded JSON value as Go's ``fmt.Sprintf("%v")`` prints it (custom-columns cells)."""
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_print(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_print(x) for x in v) + "]"
    return go_value(v)


def parse_custom_columns(spec: str) -> list[tuple[str, str]]:
    """``HEADER:.json.path,...`` into (header, relaxed template) pairs; ValueError as kubectl words it."""
    # Lazy for start-up speed: the JSONPath engine is for -o custom-columns, -o jsonpath and --sort-by only.
    from phalanx.cli.jsonpath import JSONPathError, parse, relaxed

    if not spec:
        raise ValueError("custom-columns format specified but no custom columns given")
    cols = []
    for part in spec.split(","):
        bits = part.split(":", 1)
        if len(bits) != 2:
            raise ValueError(f'unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>')
        try:
            template = relaxed(bits[1])
            parse(template)
        except JSONPathError as e:
            raise ValueError(str(e)) from None
        cols.append((bits[0], template))
    return cols


def custom_columns_rows(cols: list[tuple[str, str]], objs: Iterable[Obj]) -> list[list[str]]:
    """One row per object: each column's values joined by commas, ``<none>`` when it has none."""
    from phalanx.cli.jsonpath import find_results  # lazy for start-up speed

    rows = []
    for o in objs:
        cells = []
        for _, template in cols:
            results = find_results(template, o, allow_missing=True)
            values = results[0] if results else []
            cells.append(",".join(go_print(v) for v in values) if values else NONE)
        rows.append(cells)
    return rows


def _natural_key(s: str) -> list[tuple[int, int | str, int]]:
    """Natural order as kubectl's sortorder.NaturalLess: digit runs compare as numbers."""
    return [(0, int(t), len(t)) if t.isdigit() else (1, t, 0) for t in re.split(r"(\d+)", s) if t != ""]


def sort_objects(objs: list[Obj], expr: str) -> list[Obj]:
    """`--sort-by EXPR`: objects ordered by the JSONPath's first value (numbers numerically,
    quantities as quantities, other strings naturally); those without it first.
    ValueError when no object has the field, as kubectl."""
    from phalanx.cli.jsonpath import JSONPathError, find_results, relaxed  # lazy for start-up speed

    try:
        template = relaxed(expr)
        keyed = []
        for o in objs:
            results = find_results(template, o, allow_missing=True)
            keyed.append(results[0][0] if results and results[0] else _MISSING_SORT)
    except JSONPathError as e:
        raise ValueError(str(e)) from None
    if objs and all(k is _MISSING_SORT for k in keyed):
        raise ValueError(f"couldn't find any field with path \"{template}\" in the list of objects")

    def key(k: Any) -> tuple:
        if k is _MISSING_SORT:
            return (0,)
        if isinstance(k, bool):
            return (1, int(k))
        if isinstance(k, (int, float)):
            return (2, k)
        if isinstance(k, str):
            try:
                return (3, float(parse_quantity(k)))
            except (ValueError, TypeError, ArithmeticError):
                return (4, _natural_key(k))
        return (5, go_print(k))

    order = sorted(range(len(objs)), key=lambda i: key(keyed[i]))
    return [objs[i] for i in order]


_MISSING_SORT = object()
