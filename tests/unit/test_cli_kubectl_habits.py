"""The kubectl habits of the CLI as pure logic: JSONPath templates (outputs checked
against kubectl 1.32's), custom columns, --sort-by, `-f DIR`, the last-applied
annotation and the three-way merge patch; and the import budget of `phalanx get`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from phalanx.cli import applyconfig, jsonpath, printers
from phalanx.cli.applycmd import manifest_files

LIST = {"apiVersion": "v1", "kind": "List", "items": [
    {"kind": "Queue", "apiVersion": "scheduling.volcano.sh/v1beta1",
     "metadata": {"name": "default", "labels": {"b": "2", "a": "1"}}, "spec": {"weight": 1, "parent": "root"}},
    {"kind": "Queue", "apiVersion": "scheduling.volcano.sh/v1beta1",
     "metadata": {"name": "root"}, "spec": {"weight": 10}},
]}


@pytest.mark.parametrize("template, expected", [
    ("{.items[*].metadata.name}", "default root"),
    (r'{range .items[*]}{.metadata.name}{"\t"}{.spec.weight}{"\n"}{end}', "default\t1\nroot\t10\n"),
    ('{.items[?(@.spec.parent=="root")].metadata.name}', "default"),
    ("{.items[?(@.spec.weight>5)].metadata.name}", "root"),
    ("{.items[?(@.spec.parent)].metadata.name}", "default"),
    ("{.items[0].metadata.labels}", '{"a":"1","b":"2"}'),  # maps print as JSON, as kubectl 1.32
    ("{.items[-1].metadata.name}", "root"),
    ("{.items[0:1].metadata.name}", "default"),
    ("{.items[*].spec.missing}", ""),
    ("{..weight}", "1 10"),
    ("names: {.items[*].metadata.name}!", "names: default root!"),
    ("{.items[0].metadata['name','labels']}", 'default {"a":"1","b":"2"}'),
    ("{range .items[*]}[{.metadata.name}]{end}", "[default][root]"),
])
def test_jsonpath_templates(template, expected):
    assert jsonpath.execute(template, LIST, allow_missing=True) == expected


def test_empty_range_ends_the_template_as_kubectl():
    assert jsonpath.execute(r'{range .items[*]}{.metadata.name}{end}after', {"items": []}, True) == ""


@pytest.mark.parametrize("bad", ["{.items[", "{.items[*]", "{.a[x]}", '{"unterminated}'])
def test_jsonpath_syntax_errors(bad):
    with pytest.raises(jsonpath.JSONPathError):
        jsonpath.parse(bad)


def test_missing_key_is_an_error_unless_allowed():
    with pytest.raises(jsonpath.JSONPathError, match="missing is not found"):
        jsonpath.execute("{.missing}", {"a": 1})


def test_relaxed_paths():
    assert {jsonpath.relaxed(p) for p in (".metadata.name", "metadata.name", "{.metadata.name}")} == {
        "{.metadata.name}"}


def test_custom_columns_print_go_values_and_none():
    cols = printers.parse_custom_columns("NAME:.metadata.name,LABELS:.metadata.labels,W:spec.weight,X:.nope")
    rows = printers.custom_columns_rows(cols, LIST["items"])
    assert rows == [["default", "map[a:1 b:2]", "1", "<none>"], ["root", "<none>", "10", "<none>"]]
    with pytest.raises(ValueError, match="expected <header>:<json-path-expr>"):
        printers.parse_custom_columns("NAME")


def test_sort_by_numbers_names_and_quantities():
    objs = [{"metadata": {"name": n}, "spec": {"w": w, "cpu": c}}
            for n, w, c in (("pod-10", 3, "1500m"), ("pod-2", 20, "2"), ("pod-1", 1, "100m"))]
    names = lambda xs: [o["metadata"]["name"] for o in xs]
    assert names(printers.sort_objects(objs, ".metadata.name")) == ["pod-1", "pod-2", "pod-10"]
    assert names(printers.sort_objects(objs, "{.spec.w}")) == ["pod-1", "pod-10", "pod-2"]
    assert names(printers.sort_objects(objs, ".spec.cpu")) == ["pod-1", "pod-10", "pod-2"]
    with pytest.raises(ValueError, match="couldn't find any field"):
        printers.sort_objects(objs, ".spec.nope")


def test_show_labels_and_names():
    headers, rows = printers.add_labels_column(["NAME"], [["default"], ["root"]], LIST["items"])
    assert headers == ["NAME", "LABELS"] and rows == [["default", "a=1,b=2"], ["root", "<none>"]]
    assert printers.object_name(LIST["items"][0]) == "queue.scheduling.volcano.sh/default"
    assert printers.object_name({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}) == "pod/p"


def test_last_applied_is_what_kubectl_writes():
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
           "data": {"cmd": "a & b"}}
    out = applyconfig.with_last_applied(doc)
    assert out["metadata"]["annotations"][applyconfig.LAST_APPLIED] == (
        '{"apiVersion":"v1","data":{"cmd":"a \\u0026 b"},"kind":"ConfigMap",'
        '"metadata":{"annotations":{},"name":"c","namespace":"default"}}\n')
    assert applyconfig.last_applied(out) == dict(doc, metadata=dict(doc["metadata"], annotations={}))
    assert "annotations" not in doc["metadata"]  # the caller's document is left as it was


def test_three_way_patch_removes_what_the_file_dropped():
    original = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1, "y": 2}}
    modified = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 5}}
    current = {"metadata": {"labels": {"a": "1", "b": "2", "server": "s"}, "uid": "u"},
               "spec": {"x": 1, "y": 2, "defaulted": True}}
    assert applyconfig.three_way_patch(original, modified, current) == {
        "metadata": {"labels": {"b": None}}, "spec": {"x": 5, "y": None}}
    same = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 5}}
    assert applyconfig.three_way_patch(same, same, {"metadata": {"labels": {"a": "1"}, "uid": "u"},
                                                    "spec": {"x": 5, "d": 1}}) == {}


def test_manifest_files_of_a_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("b.yaml", "a.json", "c.yml", "notes.txt", "sub/d.yaml"):
        (tmp_path / name).write_text("{}")
    assert [os.path.relpath(p, tmp_path) for p in manifest_files([str(tmp_path)], False)] == [
        "a.json", "b.yaml", "c.yml"]
    assert [os.path.relpath(p, tmp_path) for p in manifest_files([str(tmp_path)], True)] == [
        "a.json", "b.yaml", "c.yml", "sub/d.yaml"]


HEAVY = ("phalanx.store", "phalanx.controller", "phalanx.scheduler", "phalanx.node.processes", "phalanx.server",
         "phalanx.cluster", "phalanx.api.admission", "matplotlib", "aiohttp", "asyncio", "cryptography",
         "rich")


@pytest.mark.parametrize("argv", [["get", "q"], ["describe", "q", "default"], ["delete", "q", "x"]])
def test_object_commands_do_not_import_the_control_plane(tmp_path, argv):
    env = dict(os.environ, PHALANX_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "phalanx.cli.main", *argv], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "no Phalanx control plane is running" in r.stderr  # it ran, and stopped there
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "phalanx.cli.objects" in imported
    assert not {m for m in imported if m.split(".")[0] in HEAVY or any(
        m == h or m.startswith(h + ".") for h in HEAVY)}
