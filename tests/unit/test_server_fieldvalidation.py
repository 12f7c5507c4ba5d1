"""fieldValidation: unknown fields dropped (and reported) or refused as the apiserver does."""
from __future__ import annotations

import json

import pytest

from phalanx.api.admission import StrictDecodingError, admit
from phalanx.objects.errors import BadRequest, FieldError
from phalanx.server.fieldvalidation import (
    PatchStrictDecodingError,
    drop_unknown_fields,
    parse_mode,
    parse_path,
    unknown_fields,
    warning,
)
from phalanx.server.status import error_status


def job(**extra_run_policy) -> dict:
    container = {"name": "pytorch", "image": "busybox", "command": ["true"]}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "default"},
            "spec": {"runPolicy": {"backoffLimit": 3, **extra_run_policy},
                     "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                         "containers": [container]}}}}}}


@pytest.mark.parametrize("value, mode", [(None, "Strict"), ("", "Strict"), ("Strict", "Strict"), ("Warn", "Warn"),
                                         ("Ignore", "Ignore")])
def test_modes(value, mode):
    assert parse_mode(value) == mode


def test_unknown_mode_is_refused():
    with pytest.raises(BadRequest) as e:
        parse_mode("strict")
    assert e.value.message == 'fieldValidation: Unsupported value: "strict": supported values: "Ignore", ' \
                              '"Strict", "Warn"'


@pytest.mark.parametrize("path, steps", [
    ("spec", ["spec"]),
    ("spec.runPolicy.backoffLimits", ["spec", "runPolicy", "backoffLimits"]),
    ("spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].foo",
     ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "foo"]),
    ("a[1][2].b", ["a", 1, 2, "b"]),
    ("", None), ("a..b", None), ("a[x]", None), ("[0]", [0]),
])
def test_parse_path(path, steps):
    assert parse_path(path) == steps


def test_unknown_fields_are_dropped_and_named():
    obj = job(backoffLimits=3)
    obj["spec"]["unknownField"] = "x"
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["foo"] = "bar"
    pruned, dropped = drop_unknown_fields(obj, admit)
    assert sorted(dropped) == ["spec.pytorchReplicaSpecs.Master.template.spec.containers[0].foo",
                               "spec.runPolicy.backoffLimits", "spec.unknownField"]
    assert pruned == job()
    assert "unknownField" in obj["spec"]  # the input is not modified
    admit(pruned)


def test_an_object_without_unknown_fields_is_returned_as_is_even_when_otherwise_invalid():
    bad = job()
    bad["spec"]["runPolicy"]["backoffLimit"] = "three"  # a schema error: for the real write to report
    assert drop_unknown_fields(bad, admit) == (bad, [])


def test_a_field_that_cannot_be_located_keeps_the_strict_error():
    def admit_confused(obj):
        raise StrictDecodingError([FieldError("spec.nowhere", "Unknown", 'unknown field "spec.nowhere"')],
                                  "PyTorchJob", "v1")

    with pytest.raises(StrictDecodingError):
        drop_unknown_fields(job(), admit_confused)


def test_warning_header_is_the_apiservers():
    assert warning("spec.runPolicy.backoffLimits") == '299 - "unknown field \\"spec.runPolicy.backoffLimits\\""'


def test_patch_error_is_golden_36s_422():
    try:
        admit(job(backoffLimits=3))
    except StrictDecodingError as e:
        strict = e
    assert unknown_fields(strict) == ["spec.runPolicy.backoffLimits"]
    patched = job(backoffLimits=3)
    err = PatchStrictDecodingError(patched, strict, sort_keys=True)
    status = error_status(err)
    value = json.dumps(patched, separators=(",", ":"), sort_keys=True)
    expected_cause = (f"Invalid value: {json.dumps(value)}: strict decoding error: "
                      'unknown field "spec.runPolicy.backoffLimits"')
    assert status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": ' "" is invalid: patch: ' + expected_cause, "reason": "Invalid", "code": 422,
                      "details": {"causes": [{"reason": "FieldValueInvalid", "message": expected_cause,
                                              "field": "patch"}]}}
