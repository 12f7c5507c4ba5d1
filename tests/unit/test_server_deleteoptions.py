"""DeleteOptions from a DELETE's body or query, and the propagation Phalanx applies."""
from __future__ import annotations

import pytest
from multidict import MultiDict

from phalanx.objects.errors import BadRequest
from phalanx.server.deleteoptions import DeleteOptions, effective_policy, parse_delete_options


def q(**kw: str) -> MultiDict:
    return MultiDict(kw)


def test_kubectls_body_golden_67():
    assert parse_delete_options({"propagationPolicy": "Background"}, q()) == DeleteOptions(
        propagation_policy="Background")


def test_full_body():
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 5, "propagationPolicy": "Foreground",
            "preconditions": {"uid": "u1", "resourceVersion": "7"}}
    assert parse_delete_options(body, q()) == DeleteOptions(5, "Foreground", "u1", "7")


def test_query_parameters_and_body_precedence():
    assert parse_delete_options(None, q(gracePeriodSeconds="0", propagationPolicy="Orphan")) == DeleteOptions(
        0, "Orphan")
    opts = parse_delete_options({"gracePeriodSeconds": 3}, q(gracePeriodSeconds="9", propagationPolicy="Background"))
    assert (opts.grace_period_seconds, opts.propagation_policy) == (3, "Background")


@pytest.mark.parametrize("orphan, policy", [(True, "Orphan"), (False, "Background"), ("true", "Orphan")])
def test_orphan_dependents_is_a_policy(orphan, policy):
    body = {"orphanDependents": orphan} if not isinstance(orphan, str) else None
    query = q(orphanDependents=orphan) if isinstance(orphan, str) else q()
    assert parse_delete_options(body, query).propagation_policy == policy


def test_dry_run_from_body_or_query():
    assert parse_delete_options({"dryRun": ["All"]}, q()).dry_run
    assert parse_delete_options(None, q(dryRun="All")).dry_run
    assert not parse_delete_options(None, q()).dry_run


@pytest.mark.parametrize("body, query, words", [
    ([], {}, "must be a JSON object"),
    ({"kind": "Pod"}, {}, 'not a "Pod"'),
    ({"gracePeriodSeconds": -1}, {}, "gracePeriodSeconds: Invalid value: -1"),
    ({"gracePeriodSeconds": True}, {}, "gracePeriodSeconds: Invalid value: true: must be an integer"),
    ({"gracePeriodSeconds": "5"}, {}, "must be an integer"),
    (None, {"gracePeriodSeconds": "soon"}, 'gracePeriodSeconds: Invalid value: "soon"'),
    ({"propagationPolicy": "Sideways"}, {}, 'propagationPolicy: Unsupported value: "Sideways"'),
    ({"propagationPolicy": 1}, {}, "propagationPolicy: Invalid value: 1: must be a string"),
    ({"propagationPolicy": "Orphan", "orphanDependents": True}, {}, "cannot both be set"),
    ({"orphanDependents": "yes"}, {}, "orphanDependents: Invalid value"),
    ({"preconditions": []}, {}, "preconditions: Invalid value"),
    ({"preconditions": {"uid": 3}}, {}, "preconditions.uid: Invalid value: 3"),
    ({"dryRun": ["Some"]}, {}, 'dryRun: Unsupported value: "Some"'),
    (None, {"dryRun": "x"}, 'dryRun: Unsupported value: "x"'),
])
def test_bad_options_name_the_field_and_the_rule(body, query, words):
    with pytest.raises(BadRequest) as e:
        parse_delete_options(body, q(**query))
    assert words in e.value.message


@pytest.mark.parametrize("kind, requested, applied", [
    ("PyTorchJob", None, "Foreground"),
    ("PyTorchJob", "Background", "Foreground"),
    ("TFJob", "Background", "Foreground"),
    ("PyTorchJob", "Orphan", "Orphan"),
    ("PyTorchJob", "Foreground", "Foreground"),
    ("Pod", "Background", "Background"),
    ("Queue", None, None),
    ("PodGroup", "Orphan", "Orphan"),
])
def test_jobs_are_deleted_in_the_foreground_unless_orphaned(kind, requested, applied):
    assert effective_policy(kind, requested) == applied
