"""Hostile input, property-based (hypothesis): manifests, admission and the HTTP API.

Every property runs with a fixed seed (``derandomize=True``: the examples are
the same on every run) and a fixed number of examples, all of which run when
the property holds:

=============================================  ========
property                                       examples
=============================================  ========
mutated seed job through ``admit``                  500
unknown fields anywhere in the seed job             150
manifest text mutations (``load_manifests``)        350
arbitrary text and bytes as a manifest              250
HTTP POST/PUT bodies (real server)                  450
HTTP PATCH bodies (merge, JSON, strategic)          300
HTTP paths, methods and query strings               300
=============================================  ========
total                                             2,300

(``benchmarks/fuzz_api.py`` runs the same properties with more examples.)

What must hold for every input: no exception other than an API error escapes
(``admit``, ``load_manifests``) and the server answers no 5xx and logs no
error; a refused write leaves the store exactly as it was (no partial
object, not even a new resourceVersion); and every refusal names where: the
field path of the mutated value (``details.causes`` or the message), the
unknown field, the document and line of a manifest, the query parameter.
"""
from __future__ import annotations

import asyncio
import copy
import http.client
import json
import logging
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from phalanx.api.admission import admit
from phalanx.api.manifest import ManifestError, load_manifests
from phalanx.api.registry import all_kinds
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import ApiError, BadRequest, FieldError, Forbidden, Invalid
from phalanx.server.app import make_app, serve
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
SEED: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "pytorchjob.yaml").read_text())
EXAMPLES = {
    "admit": 500, "unknown_fields": 150, "manifest_text": 350, "arbitrary_text": 250,
    "http_bodies": 450, "http_patch": 300, "http_paths": 300,
}
assert sum(EXAMPLES.values()) >= 2000


def _settings(name: str) -> Any:
    return settings(max_examples=EXAMPLES[name], derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------

HOSTILE_STRINGS = [
    "", " ", "../x", "..", ".", "a/b", "/etc/passwd", "..%2f..%2fx", "x\x00y", "\x00", "a\nb", "\t",
    "ünïcödé", "名前", "\u202eevil", "😀", "A", "-a", "a-", "a_b", "a.b", "a" * 63, "a" * 64, "a" * 254,
    "$(touch /tmp/pwned)", "`id`", "a;b", "a|b", "*", "{{x}}", "9" * 400, "0x10", "1e400", "true", "null",
    "pytorch", "Master", "Worker", "cpu", "100Mi", "-1",
]
HUGE_NUMBERS = [2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30,
                10**300, 10**400, 1e308, -1e308, 5e-324, 0.5, -0.0]


def _nest(depth: int, leaf: Any, as_list: bool) -> Any:
    for _ in range(depth):
        leaf = [leaf] if as_list else {"a": leaf}
    return leaf


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(HUGE_NUMBERS), st.floats(), st.text(max_size=20), st.sampled_from(HOSTILE_STRINGS),
    st.text(min_size=300, max_size=1500),
)
nested = st.builds(_nest, st.sampled_from([2, 63, 64, 65, 100, 400]), scalars, st.booleans())
small_json = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)), max_leaves=12)
hostile_values = st.one_of(scalars, nested, small_json)


def _paths(obj: Any, prefix: tuple = ()) -> Iterator[tuple]:
    if prefix:
        yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


SEED_PATHS = list(_paths(SEED))


def _get(obj: Any, path: tuple) -> Any:
    for step in path:
        obj = obj[step]
    return obj


DICT_PATHS = [()] + [p for p in SEED_PATHS if isinstance(_get(SEED, p), dict)]


def _mutate(obj: dict, path: tuple, op: str, value: Any) -> dict:
    obj = copy.deepcopy(obj)
    parent = _get(obj, path[:-1])
    if op == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


@st.composite
def mutated_jobs(draw: Any) -> tuple[dict, tuple]:
    """The seed job with one value, at any level, replaced by a hostile one or removed."""
    path = draw(st.sampled_from(SEED_PATHS))
    op = draw(st.sampled_from(["replace", "replace", "replace", "delete"]))
    return _mutate(SEED, path, op, draw(hostile_values) if op == "replace" else None), path


@st.composite
def jobs_with_unknown_field(draw: Any) -> tuple[dict, tuple, str]:
    path = draw(st.sampled_from(DICT_PATHS))
    key = "x" + draw(st.text(max_size=30))
    obj = copy.deepcopy(SEED)
    _get(obj, path)[key] = draw(hostile_values)
    return obj, path, key


# --------------------------------------------------------------------------
# "The refusal names the field"
# --------------------------------------------------------------------------

_TOKEN = re.compile(r"[^.\[\]]+")


def _tokens(path: str) -> list[str]:
    return _TOKEN.findall(path)


def _related(error_path: str, mutated: tuple) -> bool:
    """The error is about the mutated value, something inside it, or a field holding it."""
    got = _tokens(error_path)
    want = [t for step in mutated for t in _tokens(str(step))]
    n = min(len(got), len(want))
    for a, b in zip(got[:n], want[:n]):
        if a != b and not (a.endswith("...") and b.startswith(a[:-3])):
            return False
    return True


_PATHLIKE = re.compile(r"[A-Za-z]\w*(?:\.[\w-]+|\[[^\]]*\])+")


def _names_path(message: str, mutated: tuple) -> bool:
    """A message without causes (403 webhook, 400) that still names the field."""
    if mutated in ((), ("kind",), ("apiVersion",)):
        return bool(re.search(r"kind|Kind|apiVersion|version|mapping|object", message))
    if len(mutated) == 1 and str(mutated[0]) in message:
        return True
    return any(_related(p, mutated) for p in _PATHLIKE.findall(message))


def check_admit(obj: Any, mutated: tuple, key: str | None = None) -> None:
    before = json.dumps(obj, sort_keys=True, default=repr)
    try:
        out = admit(obj)
    except ApiError as e:
        event(f"refused {e.code} {type(e).__name__}")
        assert 400 <= e.code < 500, f"admission failed with {e.code}: {e.message}"
        assert e.message
        errors: list[FieldError] = getattr(e, "errors", None) or []
        if isinstance(e, (Invalid, Forbidden)) and errors:
            assert all(fe.path for fe in errors), e.message
            assert any(_related(fe.path, mutated) or (key is not None and key[:60] in str(fe))
                       for fe in errors), f"{mutated} not named in {[fe.path for fe in errors]}: {e.message[:500]}"
        else:
            assert isinstance(e, BadRequest), e
            assert _names_path(e.message, mutated) or (key is not None and key[:60] in e.message), \
                f"{mutated} not named in {e.message[:500]}"
    else:
        event("admitted")
        assert isinstance(out, dict)
        json.dumps(out, allow_nan=False)  # what would be stored is plain JSON
    assert json.dumps(obj, sort_keys=True, default=repr) == before, "admit modified its input"


# --------------------------------------------------------------------------
# Manifests and admission
# --------------------------------------------------------------------------

@_settings("admit")
@given(mutated_jobs())
@example((_mutate(SEED, ("metadata", "name"), "replace", "../x"), ("metadata", "name")))
@example((_mutate(SEED, ("metadata", "namespace"), "replace", "a/b"), ("metadata", "namespace")))
@example((_mutate(SEED, ("spec", "pytorchReplicaSpecs", "Master", "template", "spec", "containers", 0, "name"),
                  "replace", "../../etc"),
          ("spec", "pytorchReplicaSpecs", "Master", "template", "spec", "containers", 0, "name")))
@example((_mutate(SEED, ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "command"),
                  "replace", ["sh", "-c", "x\x00y"]),
          ("spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "command")))
@example((_mutate(SEED, ("kind",), "replace", "Frobnicator"), ("kind",)))
@example((_mutate(SEED, ("apiVersion",), "replace", "kubeflow.org/v9"), ("apiVersion",)))
def test_mutated_seed_job_through_admission(case: tuple[dict, tuple]) -> None:
    check_admit(*case)


@_settings("unknown_fields")
@given(jobs_with_unknown_field())
def test_unknown_fields_anywhere_are_named(case: tuple[dict, tuple, str]) -> None:
    obj, path, key = case
    check_admit(obj, path + (key,), key)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [" + ", ".join([f"*{p}"] * 10) + "]\n" for p, n in zip("abcdefgh", "bcdefghi"))


def _dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True)


@st.composite
def manifest_texts(draw: Any) -> str:
    """YAML as people (and attackers) write it: a mutated seed job, then a textual twist."""
    obj, _ = draw(mutated_jobs())
    try:
        text = _dump(obj)
    except (yaml.YAMLError, ValueError, RecursionError):
        text = _dump(SEED)
    twist = draw(st.sampled_from(["none", "duplicate", "bomb", "recursive", "unknown-kind", "list", "control",
                                  "truncate", "tab", "deep", "second-doc", "anchor-merge", "bad-tag"]))
    lines = text.splitlines(keepends=True)
    if twist == "duplicate":
        i = draw(st.integers(0, len(lines) - 1))
        lines.insert(i + 1, lines[i])
        text = "".join(lines)
    elif twist == "bomb":
        text = "apiVersion: v1\nkind: ConfigMap\n" + BOMB + "---\n" + text
    elif twist == "recursive":
        text += "extra: &r [*r]\n"
    elif twist == "unknown-kind":
        text += "---\n" + _dump({"apiVersion": draw(st.sampled_from(["v1", "x/v1", "", "kubeflow.org/v1"])),
                                 "kind": draw(st.sampled_from(HOSTILE_STRINGS)), "metadata": {"name": "x"}})
    elif twist == "list":
        text = _dump({"apiVersion": "v1", "kind": "List", "items": [obj, draw(scalars)]})
    elif twist == "control":
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["\x00", "\x01", "\x1b", "\ufffe", "\x7f"])) + text[i:]
    elif twist == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif twist == "tab":
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = "\t" + lines[i]
        text = "".join(lines)
    elif twist == "deep":
        n = draw(st.sampled_from([65, 500, 20000]))
        text += "deep: " + "[" * n + "]" * n + "\n"
    elif twist == "second-doc":
        text += "---\n" + draw(st.text(max_size=40)) + "\n"
    elif twist == "anchor-merge":
        text = "base: &b {name: pytorch}\n" + text + "other:\n  <<: *b\n"
    elif twist == "bad-tag":
        text += "x: !!python/object/apply:os.system ['id']\n"
    return text


_WHERE = re.compile(r"line \d+|document \d+|byte \d+|larger than")


def check_manifest(text: str | bytes) -> None:
    try:
        objs = load_manifests(text, "fuzz.yaml")
    except ManifestError as e:
        event("ManifestError")
        assert e.message.startswith("error parsing fuzz.yaml"), e.message
        assert _WHERE.search(e.message), f"no document/line in: {e.message[:300]}"
        return
    except ApiError as e:  # pragma: no cover - the failure message is the point
        raise AssertionError(f"load_manifests raised {type(e).__name__}, not ManifestError: {e}") from e
    for obj in objs:
        assert isinstance(obj, dict) and isinstance(obj["kind"], str) and isinstance(obj["apiVersion"], str)
        try:
            admit(obj)
        except ApiError as e:
            assert 400 <= e.code < 500, e.message
            errors = getattr(e, "errors", None) or []
            assert all(fe.path for fe in errors)
            assert errors or e.message


@_settings("manifest_text")
@given(manifest_texts())
@example("apiVersion: v1\nkind: Pod\n" + BOMB)
@example("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nmetadata: {name: b}\n")
@example("a: " + "x" * (4 * 2**20))
def test_manifest_text_mutations(text: str) -> None:
    check_manifest(text)


@_settings("arbitrary_text")
@given(st.one_of(st.text(max_size=300), st.binary(max_size=300),
                 st.text(alphabet="[]{}:-&*!|>'\"#%@` \n\t,?abc01", max_size=300)))
def test_arbitrary_text_is_objects_or_a_manifest_error(text: str | bytes) -> None:
    check_manifest(text)


# --------------------------------------------------------------------------
# The HTTP API, served for real on loopback
# --------------------------------------------------------------------------

TOKEN = "fuzz-token"
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
PODS = "/api/v1/namespaces/default/pods"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
SEED_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default",
                                                            "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"],
                                     "env": [{"name": "A", "value": "1"}]}]}}
SEED_QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"},
              "spec": {"weight": 1}}


class _Logs:
    """A log provider that answers at once (follow or not)."""

    async def open(self, namespace, pod, container, previous, follow, tail):
        yield b"hello\n"


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class ApiServer:
    """The real app over a LocalClient, on its own event-loop thread; each
    example gets a fresh in-memory store holding the same three objects."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.local = LocalClient(self.fresh_store())
        app = make_app(self.local, TOKEN, log_provider=_Logs())
        self.runner, url = asyncio.run_coroutine_threadsafe(serve(app), self.loop).result(30)
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port
        self.conn: http.client.HTTPConnection | None = None
        self.errors = _Errors()
        for name in ("phalanx", "aiohttp"):
            logging.getLogger(name).addHandler(self.errors)

    @staticmethod
    def fresh_store() -> Store:
        store = Store(None, FakeClock(), admission=admit, history_size=100)
        for obj in (SEED, SEED_POD, SEED_QUEUE):
            store.create(copy.deepcopy(obj))
        return store

    def reset(self) -> None:
        self.local.store = self.fresh_store()

    def snapshot(self) -> str:
        store = self.local.store
        return json.dumps({"rv": store.current_rv(), **{k: store.list(k)[0] for k in all_kinds()}}, sort_keys=True)

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
                break
            except (ConnectionError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        if resp.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = None
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        for name in ("phalanx", "aiohttp"):
            logging.getLogger(name).removeHandler(self.errors)
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    s = ApiServer()
    try:
        yield s
    finally:
        s.close()


_BODY_WHERE = re.compile(r"line \d+|column \d+|byte \d+|body is empty|nested too deeply|must be a JSON|"
                         r"array of operations|JSON object|not valid JSON: .+?: ")


def check_response(server: ApiServer, method: str, path: str, body: bytes | None, content_type: str,
                   mutated: tuple | None = None, params: list[str] = ()) -> tuple[int, Any]:
    """One request against a fresh store, and everything that must hold of the answer."""
    server.reset()
    before = server.snapshot()
    seen = len(server.errors.records)
    status, reply = server.request(method, path, body, content_type)
    event(f"HTTP {status}")
    assert status < 500, (status, reply)
    assert len(server.errors.records) == seen, [r.getMessage() for r in server.errors.records[seen:]]
    if status < 400:
        return status, reply
    assert isinstance(reply, dict) and reply.get("kind") == "Status" and reply.get("code") == status, reply
    message = reply.get("message") or ""
    assert message
    if method in ("POST", "PUT", "PATCH", "DELETE"):
        assert server.snapshot() == before, f"a refused {method} changed the store: {message[:300]}"
    causes = (reply.get("details") or {}).get("causes") or []
    if status == 422:
        assert causes and all(c.get("field") for c in causes), reply
        if mutated is not None:
            assert any(_related(c["field"], mutated) or c["field"] == "patch" for c in causes), \
                f"{mutated} not named in {causes}"
    elif status == 403:
        assert _PATHLIKE.search(message), f"403 names no field: {message[:400]}"
        if mutated is not None:
            assert _names_path(message, mutated), f"{mutated} not named in {message[:400]}"
    elif status == 400 and mutated is not None:
        assert _names_path(message, mutated) or "nested too deeply" in message, \
            f"{mutated} not named in {message[:400]}"
    elif status == 400:
        squeezed = message.replace(" ", "").lower()
        assert (_BODY_WHERE.search(message) or any(p.lower() in squeezed for p in params if p)
                or _PATHLIKE.search(message) or _SAYS_WHAT.search(message)), \
            f"400 does not say what is wrong: {message[:400]}"
    elif status == 404:
        assert "not found" in message or "could not find" in message, message
    return status, reply


_SAYS_WHAT = re.compile(r"unknown field|no matches for kind|'Kind' is missing|does not match|\bkind\b|apiVersion|metadata|patch|"
                        r"dryRun|Invalid value|Unsupported value|binding|container|DeleteOptions")


def _json(obj: Any) -> bytes:
    try:
        return json.dumps(obj).encode()
    except (ValueError, RecursionError):
        return b'{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": ' + b"1" * 5000 + b"}"


RAW_BODIES = [b"", b" ", b"{", b"[]", b"null", b"42", b'"s"', b"\xff\xfe", b"{\"a\": NaN}", b"{\"a\": Infinity}",
              b"[" * 5000 + b"]" * 5000, b"{\"kind\": \"PyTorchJob\", \"kind\": \"TFJob\"}", b"1" * 5000,
              b"{\"metadata\": {\"name\": \"seed\", \"name\": \"other\"}}", b"\x00", "{\"a\": \"\\ud800\"}".encode()]


@st.composite
def object_requests(draw: Any) -> tuple[str, str, bytes, str, tuple | None]:
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "raw", "json", "yaml"]))
    method = draw(st.sampled_from(["POST", "PUT"]))
    path = JOBS if method == "POST" else JOBS + "/pytest"
    if kind == "mutated":
        obj, mutated = draw(mutated_jobs())
        if method == "POST" and isinstance(obj.get("metadata"), dict) and obj["metadata"].get("name") == "pytest":
            obj["metadata"]["name"] = "fresh"  # a create that can succeed
        return method, path, _json(obj), "application/json", mutated
    if kind == "raw":
        return method, path, draw(st.sampled_from(RAW_BODIES)), "application/json", None
    if kind == "yaml":
        return method, path, draw(manifest_texts()).encode("utf-8", "surrogatepass"), "application/yaml", None
    return method, path, _json(draw(small_json)), "application/json", None


@_settings("http_bodies")
@given(object_requests())
@example(("POST", JOBS, ("apiVersion: v1\nkind: Pod\n" + BOMB).encode(), "application/yaml", None))
@example(("POST", JOBS, b"[" * 100000 + b"]" * 100000, "application/json", None))
@example(("PUT", JOBS + "/pytest", b'{"": ' + b"7" * 400 + b"}", "application/json", None))  # fuzz_api.py: no path
def test_http_create_and_update_bodies(server: ApiServer, case: tuple) -> None:
    method, path, body, ctype, mutated = case
    if mutated is not None and method == "PUT" and mutated[:2] == ("metadata", "name"):
        mutated = None  # the name must match the URL: refused as a 400 naming both
    check_response(server, method, path, body, ctype, mutated)


JSON_POINTERS = ["", "/", "/spec", "/metadata/name", "/metadata/labels/a~1b", "/spec/pytorchReplicaSpecs/Master",
                 "/spec/pytorchReplicaSpecs/Master/replicas", "/spec/pytorchReplicaSpecs/Worker/template/spec/"
                 "containers/0", "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/-",
                 "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/99", "/status", "/kind",
                 "/metadata/resourceVersion", "/x~2y", "spec", "/a/b/c/d", "/spec/containers/0/name"]


@st.composite
def patch_requests(draw: Any) -> tuple[str, bytes, str]:
    kind = draw(st.sampled_from(["merge", "json", "strategic", "raw"]))
    target = draw(st.sampled_from([JOBS + "/pytest", PODS + "/p1", QUEUES + "/q1", JOBS + "/pytest/status",
                                   PODS + "/p1/status"]))
    if kind == "merge":
        body = draw(st.one_of(small_json, st.builds(lambda p, v: _mutate(SEED, p, "replace", v)
                                                    if len(p) > 0 else {}, st.sampled_from(SEED_PATHS),
                                                    hostile_values)))
        return target, _json(body), "application/merge-patch+json"
    if kind == "json":
        op = st.fixed_dictionaries(
            {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]),
             "path": st.one_of(st.sampled_from(JSON_POINTERS), st.text(max_size=20))},
            optional={"value": hostile_values, "from": st.sampled_from(JSON_POINTERS)})
        ops = draw(st.one_of(st.lists(op, max_size=5), small_json))
        return target, _json(ops), "application/json-patch+json"
    if kind == "strategic":
        directive = st.sampled_from(["$patch", "$retainKeys", "$setElementOrder/containers",
                                     "$deleteFromPrimitiveList/command", "$setElementOrder/env"])
        containers = st.lists(st.dictionaries(st.sampled_from(["name", "image", "command", "$patch", "env"]),
                                              hostile_values, max_size=3), max_size=3)
        body = {"spec": draw(st.dictionaries(st.one_of(directive, st.just("containers")),
                                             st.one_of(containers, hostile_values), max_size=3))}
        if draw(st.booleans()):
            body[draw(directive)] = draw(hostile_values)
        return PODS + "/p1", _json(body), "application/strategic-merge-patch+json"
    return target, draw(st.sampled_from(RAW_BODIES)), draw(st.sampled_from(
        ["application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json",
         "text/plain"]))


@_settings("http_patch")
@given(patch_requests())
@example((JOBS + "/pytest", json.dumps([{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"}
                                         for i in range(40)]).encode(), "application/json-patch+json"))
@example((PODS + "/p1", b'{"spec": {"$setElementOrder/containers": [{"name": {"a": null}}]}}',
          "application/strategic-merge-patch+json"))  # found by benchmarks/fuzz_api.py: was a 500
def test_http_patch_bodies(server: ApiServer, case: tuple[str, bytes, str]) -> None:
    path, body, ctype = case
    check_response(server, "PATCH", path, body, ctype)


QUERY_KEYS = ["labelSelector", "fieldSelector", "resourceVersion", "resourceVersionMatch", "limit", "continue",
              "timeoutSeconds", "fieldValidation", "dryRun", "gracePeriodSeconds", "propagationPolicy",
              "orphanDependents", "includeObject", "container", "tailLines", "limitBytes", "previous",
              "timestamps", "sinceSeconds", "follow", "pretty", "allowWatchBookmarks", "x"]
QUERY_VALUES = st.one_of(st.sampled_from(["", "0", "-1", "1", "true", "True", "abc", "a=b", "a in (b)", "!a",
                                          "metadata.name=p1", "spec.nodeName!=", "status.phase=Running",
                                          "Strict", "Ignore", "All", "Orphan", "Foreground", "Object", "None",
                                          "99999999999999999999", "1e3", "a,b", "=", "a==b", "(", "\x00",
                                          "%", "../x", "a" * 300]), st.text(max_size=20))
NAMES = st.one_of(st.sampled_from(["p1", "pytest", "q1"]), st.sampled_from(["nope"] + HOSTILE_STRINGS),
                  st.text(max_size=12))
COLLECTIONS = ["/api/v1/namespaces/{ns}/pods", "/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
               "/apis/kubeflow.org/v1/namespaces/{ns}/tfjobs", "/apis/scheduling.volcano.sh/v1beta1/queues",
               "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups", "/api/v1/namespaces",
               "/api/v1/nodes", "/api/v1/namespaces/{ns}/events", "/api/v1/namespaces/{ns}/services",
               "/api/v1/pods", "/apis/kubeflow.org/v1/pytorchjobs", "/api/v1/namespaces/{ns}/frobs",
               "/apis/nope.io/v1/things"]
SUBRESOURCES = ["", "", "/status", "/log", "/binding", "/exec", "/{name}"]


@st.composite
def path_requests(draw: Any) -> tuple[str, str, bytes | None, list[str]]:
    q = urllib.parse.quote
    ns = draw(st.one_of(st.just("default"), NAMES))
    collection = draw(st.sampled_from(COLLECTIONS)).format(ns=q(ns, safe=""))
    path = collection
    if draw(st.booleans()):
        name = draw(NAMES)
        path += "/" + q(name, safe="") + draw(st.sampled_from(SUBRESOURCES)).format(name=q(name, safe=""))
    params = draw(st.lists(st.tuples(st.sampled_from(QUERY_KEYS), QUERY_VALUES), max_size=4))
    params = [(k, v) for k, v in params if not (k in ("follow",) and v)]  # never a stream that waits
    if params:
        path += "?" + urllib.parse.urlencode(params)
    method = draw(st.sampled_from(["GET", "GET", "GET", "DELETE", "POST", "PUT", "PATCH", "OPTIONS"]))
    body = None
    if method in ("POST", "PUT", "PATCH", "DELETE") and draw(st.booleans()):
        body = _json(draw(st.one_of(small_json, st.just(SEED_POD), st.just(
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": draw(hostile_values),
             "propagationPolicy": draw(hostile_values), "preconditions": draw(hostile_values)}))))
    return method, path, body, [k for k, _ in params]


@_settings("http_paths")
@given(path_requests())
@example(("GET", PODS + "/p1/log?container=..%2F..%2Fetc&tailLines=-5", None, ["container", "tailLines"]))
@example(("GET", PODS + "?watch=maybe", None, ["watch"]))
@example(("GET", "/api/v1/namespaces/..%2F..%2Fetc/pods/passwd/log", None, []))
def test_http_paths_methods_and_query_strings(server: ApiServer, case: tuple) -> None:
    method, path, body, params = case
    content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
    check_response(server, method, path, body, content_type, params=params)
