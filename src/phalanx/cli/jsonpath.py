"""kubectl's JSONPath templates (``-o jsonpath=``, ``custom-columns``, ``--sort-by``).

The grammar and results of client-go's ``util/jsonpath``: text with ``{...}``
actions holding fields (``.a.b``, ``['a.b']``), ``[n]``, slices ``[s:e:st]``,
``[*]``, unions ``[a,b]``, ``..`` recursive descent, filters ``[?(@.x=="y")]``
(``== != < > <= >=`` or existence), ``{range X}...{end}`` and quoted text.
Pure functions over JSON-shaped values.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from phalanx.cli.gojson import compact_json

_SLICE = re.compile(r"^(-?\d*)(:-?\d*)?(:-?\d*)?$")
_DICT_KEY = re.compile(r"^'([^']*)'$")
_FILTER = re.compile(r"^([^!<>=]+)([!<>=]+)(.+?)$")
_TERMINATORS = set(" \t\r\n.,[]$@{}")
_MISSING = object()


class JSONPathError(ValueError):
    """A template that does not parse, or one that cannot be executed on the data."""


# ---------------------------------------------------------------- nodes


@dataclass
class _List:
    nodes: list[Any] = field(default_factory=list)


@dataclass
class _Text:
    text: str


@dataclass
class _Field:
    name: str


@dataclass
class _Array:
    start: int | None
    stop: int | None
    step: int | None
    single: bool  # `[n]`: one index


@dataclass
class _Filter:
    left: _List
    right: _List
    op: str


@dataclass
class _Union:
    parts: list[_List]


@dataclass
class _Number:
    value: int | float


@dataclass
class _Bool:
    value: bool


@dataclass
class _Ident:
    name: str  # range | end


class _Wildcard:
    pass


class _Recursive:
    pass


# ---------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str) -> None:
        self.input = text
        self.pos = 0
        self.start = 0
        self.root = _List()

    def parse(self) -> _List:
        self._text(self.root)
        return self.root

    def _consume(self) -> str:
        value = self.input[self.start:self.pos]
        self.start = self.pos
        return value

    def _next(self) -> str:
        if self.pos >= len(self.input):
            return ""
        ch = self.input[self.pos]
        self.pos += 1
        return ch

    def _peek(self) -> str:
        return self.input[self.pos] if self.pos < len(self.input) else ""

    def _text(self, cur: _List) -> None:
        while True:
            i = self.input.find("{", self.pos)
            if i < 0:
                self.pos = len(self.input)
                if self.pos > self.start:
                    cur.nodes.append(_Text(self._consume()))
                return
            self.pos = i
            if self.pos > self.start:
                cur.nodes.append(_Text(self._consume()))
            self.pos += 1
            self._consume()
            action = _List()
            cur.nodes.append(action)
            self._action(action)
            # after the action's `}`, text continues at the top level
            cur = self.root

    def _action(self, cur: _List) -> None:
        while True:
            rest = self.input[self.pos:]
            if rest.startswith("}"):
                self.pos += 1
                self._consume()
                return
            if rest.startswith("[?("):
                self._filter(cur)
                continue
            if rest.startswith(".."):
                if cur.nodes and isinstance(cur.nodes[-1], _Recursive):
                    raise JSONPathError("invalid multiple recursive descent")
                self.pos += 2
                self._consume()
                cur.nodes.append(_Recursive())
                if _alnum(self._peek()):
                    self._field(cur)
                continue
            ch = self._next()
            if ch == "" or ch in "\r\n":
                raise JSONPathError("unclosed action")
            if ch == " " or ch in "@$":
                self._consume()
            elif ch == "[":
                self._array(cur)
            elif ch in "\"'":
                self._quote(cur, ch)
            elif ch == ".":
                self._field(cur)
            elif ch in "+-" or ch.isdigit():
                self.pos -= 1
                self._number(cur)
            elif _alnum(ch):
                self.pos -= 1
                self._ident(cur)
            else:
                raise JSONPathError(f"unrecognized character in action: {_unicode_name(ch)}")

    def _ident(self, cur: _List) -> None:
        while self.pos < len(self.input) and self.input[self.pos] not in _TERMINATORS:
            self.pos += 1
        value = self._consume()
        cur.nodes.append(_Bool(value == "true") if value in ("true", "false") else _Ident(value))

    def _number(self, cur: _List) -> None:
        if self._peek() in ("+", "-"):
            self.pos += 1
        while self.pos < len(self.input) and (self.input[self.pos] == "." or self.input[self.pos].isdigit()):
            self.pos += 1
        value = self._consume()
        try:
            cur.nodes.append(_Number(int(value)))
            return
        except ValueError:
            pass
        try:
            cur.nodes.append(_Number(float(value)))
        except ValueError:
            raise JSONPathError(f"cannot parse number {value}") from None

    def _field(self, cur: _List) -> None:
        self._consume()
        while self.pos < len(self.input):
            ch = self.input[self.pos]
            if ch == "\\":
                self.pos += 2
                continue
            if ch in _TERMINATORS:
                break
            self.pos += 1
        self.pos = min(self.pos, len(self.input))
        value = self._consume()
        cur.nodes.append(_Wildcard() if value == "*" else _Field(value.replace("\\", "")))

    def _array(self, cur: _List) -> None:
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated array")
            if ch == "]":
                break
        text = self._consume()[1:-1]
        if text == "*":
            text = ":"
        parts = text.split(",")
        if len(parts) > 1:
            cur.nodes.append(_Union([_parse_action("[" + p.strip(" ") + "]") for p in parts]))
            return
        m = _DICT_KEY.match(text)
        if m:
            cur.nodes.extend(_parse_action("." + m.group(1)).nodes)
            return
        m = _SLICE.match(text)
        if not m:
            raise JSONPathError(f"invalid array index {text}")
        g = [m.group(1), m.group(2), m.group(3)]

        def num(s: str) -> int:
            try:
                return int(s)
            except ValueError:
                raise JSONPathError(f"array index {s} is not a number") from None

        start = num(g[0]) if g[0] else None
        if g[1] is None:  # `[n]`
            if start is None:
                raise JSONPathError(f"invalid array index {text}")
            cur.nodes.append(_Array(start, None, None, True))
            return
        stop = num(g[1][1:]) if g[1][1:] else None
        step = num(g[2][1:]) if g[2] and g[2][1:] else None
        cur.nodes.append(_Array(start, stop, step, False))

    def _filter(self, cur: _List) -> None:
        self.pos += 3
        self._consume()
        begin = end = False
        pair = ""
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated filter")
            if ch in "\"'":
                if not begin:
                    begin, pair = True, ch
                    continue
                if self.input[self.pos - 2] != "\\" and ch == pair:
                    end = True
            elif ch == ")" and begin == end:
                break
        if self._next() != "]":
            raise JSONPathError("unclosed array expect ]")
        text = self._consume()[:-2]
        m = _FILTER.match(text)
        if m is None:
            cur.nodes.append(_Filter(_parse_action(text), _List(), "exists"))
        else:
            cur.nodes.append(_Filter(_parse_action(m.group(1)), _parse_action(m.group(3)), m.group(2)))

    def _quote(self, cur: _List, quote: str) -> None:
        while True:
            ch = self._next()
            if ch in ("", "\n"):
                raise JSONPathError("unterminated quoted string")
            if ch == quote and self.input[self.pos - 2] != "\\":
                break
        raw = self._consume()
        cur.nodes.append(_Text(_unquote(raw)))


def _alnum(ch: str) -> bool:
    return ch == "_" or (ch != "" and ch.isalnum())


def _unicode_name(ch: str) -> str:
    return f"U+{ord(ch):04X} '{ch}'"


def _unquote(raw: str) -> str:
    body = raw[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
               "f": "\f", "v": "\v"}
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if nxt in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[nxt]
                digits = body[i + 2:i + 2 + width]
                try:
                    out.append(chr(int(digits, 16)))
                except ValueError:
                    raise JSONPathError(f"unquote string {raw} error invalid syntax") from None
                i += 2 + width
                continue
            raise JSONPathError(f"unquote string {raw} error invalid syntax")
        out.append(ch)
        i += 1
    return "".join(out)


def _parse_action(text: str) -> _List:
    root = _Parser("{" + text + "}").parse()
    first = root.nodes[0] if root.nodes else _List()
    return first if isinstance(first, _List) else _List([first])


def parse(template: str) -> _List:
    """The template's syntax tree; JSONPathError when it does not parse."""
    return _Parser(template).parse()


# ---------------------------------------------------------------- evaluation


class _Exec:
    def __init__(self, allow_missing: bool) -> None:
        self.allow_missing = allow_missing

    def run(self, nodes: list[Any], data: Any) -> list[list[Any]]:
        """The result sets of a node list; a `range` repeats the nodes up to its `end` per item."""
        out: list[list[Any]] = []
        i = 0
        while i < len(nodes):
            node = nodes[i]
            if isinstance(node, _List) and node.nodes and isinstance(node.nodes[0], _Ident):
                name = node.nodes[0].name
                if name == "end":
                    raise JSONPathError("not in range, nothing to end")
                if name != "range":
                    raise JSONPathError(f"unrecognized identifier {name}")
                items = self.walk([data], _List(node.nodes[1:]))
                body, after = _range_body(nodes, i + 1)
                if not items:  # as kubectl: an empty range ends the template
                    return out
                for item in items:
                    out.extend(self.run(body, item))
                i = after
                continue
            out.append(self.walk([data], node))
            i += 1
        return out

    def walk(self, values: list[Any], node: Any) -> list[Any]:
        if isinstance(node, _List):
            for n in node.nodes:
                values = self.walk(values, n)
            return values
        if isinstance(node, _Text):
            return [node.text]
        if isinstance(node, _Field):
            return self._field(values, node.name)
        if isinstance(node, _Array):
            return self._array(values, node)
        if isinstance(node, _Filter):
            return self._filter(values, node)
        if isinstance(node, (_Number, _Bool)):
            return [node.value for _ in values]
        if isinstance(node, _Wildcard):
            return [x for v in values if v is not None for x in _children(v)]
        if isinstance(node, _Recursive):
            return self._recursive(values)
        if isinstance(node, _Union):
            return [x for part in node.parts for x in self.walk(values, part)]
        if isinstance(node, _Ident):
            raise JSONPathError(f"unrecognized identifier {node.name}")
        raise JSONPathError(f"unexpected Node {node!r}")  # pragma: no cover

    def _field(self, values: list[Any], name: str) -> list[Any]:
        if not values:
            return []
        out = []
        for v in values:
            if isinstance(v, dict) and name in v:
                out.append(v[name])
        if not out and not self.allow_missing:
            raise JSONPathError(f"{name} is not found")
        return out

    def _array(self, values: list[Any], node: _Array) -> list[Any]:
        out: list[Any] = []
        for v in values:
            if v is None:
                continue
            if not isinstance(v, list):
                raise JSONPathError(f"{_go_type(v)} is not array or slice")
            n = len(v)
            start = node.start if node.start is not None else 0
            if start < 0:
                start += n
            if node.single:
                stop = start + 1
            else:
                stop = node.stop if node.stop is not None else n
                if stop < 0:
                    stop += n
            if stop != start:
                if start >= n:
                    raise JSONPathError(f"array index out of bounds: index {start}, length {n}")
                if stop > n:
                    raise JSONPathError(f"array index out of bounds: index {stop - 1}, length {n}")
            if start < 0 or stop < start:
                raise JSONPathError(f"slice bounds out of range [{start}:{stop}]")
            out.extend(v[start:stop:node.step] if node.step else v[start:stop])
        return out

    def _filter(self, values: list[Any], node: _Filter) -> list[Any]:
        out: list[Any] = []
        for v in values:
            if not isinstance(v, list):
                raise JSONPathError(f"{_go_repr(v)} is not array or slice and cannot be filtered")
            for item in v:
                try:
                    lefts = self.walk([item], node.left)
                    err = None
                except JSONPathError as e:
                    lefts, err = [], e
                if node.op == "exists":
                    if lefts:
                        out.append(item)
                    continue
                if err is not None:
                    raise err
                if not lefts:  # as kubectl 1.32: an item without the field does not match
                    continue
                if len(lefts) != 1:
                    raise JSONPathError("can only compare one element at a time")
                rights = self.walk([item], node.right)
                if len(rights) != 1:
                    raise JSONPathError("can only compare one element at a time")
                if _compare(lefts[0], rights[0], node.op):
                    out.append(item)
        return out

    def _recursive(self, values: list[Any]) -> list[Any]:
        out: list[Any] = []
        for v in values:
            if v is None:
                continue
            kids = list(_children(v))
            if kids:
                out.append(v)
                out.extend(self._recursive(kids))
        return out


def _range_body(nodes: list[Any], i: int) -> tuple[list[Any], int]:
    """The nodes from ``i`` up to the `end` that closes the range, and the index after it."""
    depth = 0
    for j in range(i, len(nodes)):
        n = nodes[j]
        if isinstance(n, _List) and n.nodes and isinstance(n.nodes[0], _Ident):
            if n.nodes[0].name == "range":
                depth += 1
            elif n.nodes[0].name == "end":
                if depth == 0:
                    return nodes[i:j], j + 1
                depth -= 1
    return nodes[i:], len(nodes)  # kubectl runs an unclosed range to the end of the template


def _children(v: Any) -> Iterator[Any]:
    if isinstance(v, dict):
        return iter(v.values())
    if isinstance(v, list):
        return iter(v)
    if isinstance(v, str):  # Go indexes a string by byte
        return iter(list(v.encode()))
    return iter(())


def _go_type(v: Any) -> str:
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    return "interface {}"


def _go_repr(v: Any) -> str:
    return text_of(v)


def _compare(left: Any, right: Any, op: str) -> bool:
    """Go template comparison: numbers with numbers, strings with strings, == also for bools."""
    def kind(x: Any) -> str:
        if isinstance(x, bool):
            return "bool"
        if isinstance(x, (int, float)):
            return "number"
        if isinstance(x, str):
            return "string"
        return "other"

    kl, kr = kind(left), kind(right)
    if op in ("==", "!="):
        if kl != kr or kl == "other":
            if kl == "other" or kr == "other":
                raise JSONPathError("invalid type for comparison")
            raise JSONPathError("incompatible types for comparison")
        return (left == right) == (op == "==")
    if op not in ("<", ">", "<=", ">="):
        raise JSONPathError(f"unrecognized filter operator {op}")
    if kl != kr:
        raise JSONPathError("incompatible types for comparison")
    if kl not in ("number", "string"):
        raise JSONPathError("invalid type for comparison")
    return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]


def text_of(v: Any) -> str:
    """A result as kubectl prints it: strings raw, numbers as Go prints them, maps and lists as JSON."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "<nil>"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    return compact_json(v)


def _go_float(v: float) -> str:
    """Go's ``%v`` of a float64 (``strconv.FormatFloat(v, 'g', -1, 64)`` with exponent >= 21 as e+)."""
    if v.is_integer() and abs(v) < 1e21:
        return str(int(v))
    r = repr(v)
    if "e" in r:
        mant, exp = r.split("e")
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    return r


def find_results(template: str | _List, data: Any, allow_missing: bool = False) -> list[list[Any]]:
    """The result sets of a template on ``data`` (one set per action or text, per range item)."""
    tree = parse(template) if isinstance(template, str) else template
    return _Exec(allow_missing).run(tree.nodes, data)


def execute(template: str | _List, data: Any, allow_missing: bool = False) -> str:
    """What ``kubectl -o jsonpath=TEMPLATE`` prints for ``data``: each set's values joined by spaces."""
    return "".join(" ".join(text_of(v) for v in rs) for rs in find_results(template, data, allow_missing))


def relaxed(expr: str) -> str:
    """kubectl's RelaxedJSONPathExpression: ``.a.b``, ``a.b`` and ``{.a.b}`` all mean ``{.a.b}``."""
    if not expr:
        return expr
    m = re.match(r"^\{?(\.?[^{}]*?)\}?$", expr)
    if m is None or (expr.startswith("{") != expr.endswith("}")):
        raise JSONPathError("unexpected path string, expected a 'name1.name2' or '.name1.name2' or "
                            "'{name1.name2}' or '{.name1.name2}'")
    inner = m.group(1)
    if inner.startswith("."):
        inner = inner[1:]
    return "{." + inner + "}"
