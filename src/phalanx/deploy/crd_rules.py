"""The job CRDs' CEL rules (``x-kubernetes-validations``): every rule of Phalanx's job
admission (``api.kubeflow_validation``) that CEL can express within the apiserver's cost
budget, so a kube-apiserver refuses such a job even with the operator (its webhooks) down.

Rules see the object as written (no defaulting webhook in front of them when it is down),
so they accept what Phalanx's defaults would fix: replica types in any case (``worker``),
an unset ``replicas`` (1). Each message is the field error Phalanx's admission prints.
Bounds the cost estimator needs: at most ``MAX_REPLICA_TYPES`` replica types and
``MAX_CONTAINERS`` containers per replica template. Left out (cost or not expressible):
TFJob's free replica type names as DNS-1035 labels (a regex per unbounded map key),
TFJob's duplicate spellings of a type (``PS`` and ``ps``), container names as DNS labels and strings
without NUL (a regex per string of every container), and the nProcPerNode warning.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.kubeflow import FRAMEWORKS, MPI, PYTORCH, SUPPORTED_MANAGED_BY, TENSORFLOW, XGBOOST, Framework

Schema = dict[str, Any]
MAX_REPLICA_TYPES = 8  # TFJob has the most known types: 5
MAX_CONTAINERS = 64
_DNS1035 = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
_DNS1123_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS1035_MSG = ("metadata.name: Invalid value: should match: a DNS-1035 label must consist of lower case alphanumeric "
                "characters or '-', start with an alphabetic character, and end with an alphanumeric character "
                "(e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _rule(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _cel_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _key_is(t: str, fw: Framework) -> str:
    """``k`` names replica type ``t`` (any case where the kind's defaults normalise keys)."""
    return f"k.lowerAscii() == '{t.lower()}'" if fw.normalise_replica_keys else f"k == '{t}'"


def _has_type(t: str, fw: Framework) -> str:
    return f"self.exists(k, {_key_is(t, fw)})" if fw.normalise_replica_keys else f"'{t}' in self"


def root_rules(fw: Framework) -> list[dict[str, str]]:
    """NameIsDNS1035Label: the name becomes part of Service (DNS) names."""
    return [_rule("!has(self.metadata.name) || size(self.metadata.name) <= 63",
                  "metadata.name: Invalid value: should match: must be no more than 63 characters"),
            _rule(f"!has(self.metadata.name) || self.metadata.name.matches('{_DNS1035}')", _DNS1035_MSG)]


def spec_rules(fw: Framework) -> list[dict[str, str]]:
    specs = f"self.{fw.replica_specs_field}"
    rules = [
        # ValidateRunPolicyUpdate: managedBy is immutable, set or unset (a transition rule).
        _rule("(has(self.runPolicy) && has(self.runPolicy.managedBy)) == "
              "(has(oldSelf.runPolicy) && has(oldSelf.runPolicy.managedBy)) && "
              "(!has(self.runPolicy) || !has(self.runPolicy.managedBy) || "
              "self.runPolicy.managedBy == oldSelf.runPolicy.managedBy)",
              "spec.runPolicy.managedBy: Invalid value: field is immutable"),
    ]
    if fw is PYTORCH:
        rules += [
            _rule(f"!has(self.elasticPolicy) || {specs}.exists(k, k.lowerAscii() == 'worker')",
                  "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"),
            _rule("!(has(self.elasticPolicy) && has(self.elasticPolicy.nProcPerNode) && has(self.nprocPerNode))",
                  "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"),
        ]
    return rules


def replica_map_rules(fw: Framework) -> list[dict[str, str]]:
    base = f"spec.{fw.replica_specs_field}"
    rules = [_rule("size(self) > 0", f"{base}: Required value: must be required")]
    if not fw.any_replica_type:
        if fw.normalise_replica_keys:
            allowed = _cel_list(tuple(t.lower() for t in fw.replica_types))
            rules.append(_rule(f"self.all(k, k.lowerAscii() in {allowed})",
                               f"{base}: Unsupported value: supported values: {_quoted(fw.replica_types)} "
                               "(any case)"))
        else:
            rules.append(_rule(f"self.all(k, k in {_cel_list(fw.replica_types)})",
                               f"{base}: Unsupported value: supported values: {_quoted(fw.replica_types)}"))
    # Two spellings of one type (Phalanx: a Duplicate value): one pass over the keys per known
    # type, so only for kinds with at most two (TFJob's five would pass the per-rule budget).
    if fw.normalise_replica_keys and len(fw.replica_types) <= 2:
        lowered = _cel_list(tuple(t.lower() for t in fw.replica_types))
        rules.append(_rule(f"{lowered}.all(t, self.filter(k, k.lowerAscii() == t).size() <= 1)",
                           f"{base}: Duplicate value: a replica type may be given once, in any case"))
    if fw in (PYTORCH, XGBOOST):
        rules.append(_rule(f"self.all(k, !({_key_is('Master', fw)}) || !has(self[k].replicas) || "
                           "self[k].replicas == 1)", f"{base}[Master].replicas: Forbidden: must be 1"))
    if fw is PYTORCH:
        rules.append(_rule(f"self.all(k, !({_key_is('Worker', fw)}) || !has(self[k].replicas) || "
                           "self[k].replicas >= 1)", f"{base}[Worker].replicas: Forbidden: must be at least 1"))
    if fw is XGBOOST:
        rules.append(_rule(_has_type("Master", fw), f"{base}[Master]: Required value: must be present"))
    if fw is TENSORFLOW:
        rules.append(_rule("self.filter(k, k.lowerAscii() in ['chief', 'master']).size() <= 1",
                           f"{base}: Forbidden: must not have more than 1 Chief or Master role"))
    if fw is MPI:
        rules += [
            _rule("!('Launcher' in self) || !has(self.Launcher.replicas) || self.Launcher.replicas == 1",
                  f"{base}[Launcher].replicas: Forbidden: must be 1"),
            _rule("'Launcher' in self", f"{base}[Launcher]: Required value: must be present"),
        ]
    return rules


def replica_rules(fw: Framework) -> list[dict[str, str]]:
    base = f"spec.{fw.replica_specs_field}[*].template.spec.containers"
    containers = "self.template.spec.containers"
    has_containers = "has(self.template) && has(self.template.spec) && has(self.template.spec.containers)"
    rules = [_rule(f"{has_containers} && size({containers}) > 0", f"{base}: Required value: must be specified")]
    if fw is not MPI:
        shown = f'"{fw.container_name}"' if fw.quote_container_name else fw.container_name
        rules.append(_rule(f"{has_containers} && {containers}.exists(c, c.name == '{fw.container_name}')",
                           f"{base}: Required value: must have at least one container with name {shown}"))
    return rules


def containers_rules(fw: Framework) -> list[dict[str, str]]:
    base = f"spec.{fw.replica_specs_field}[*].template.spec.containers[*]"
    rules = [_rule("self.all(c, has(c.image) && c.image != '')", f"{base}.image: Required value: must be required")]
    if fw is MPI:
        rules.append(_rule("self.all(c, c.name != '')", f"{base}.name: Required value: must be required"))
    return rules


def _add(node: Schema, rules: list[dict[str, str]]) -> None:
    if rules:
        node.setdefault("x-kubernetes-validations", []).extend(rules)


def add_job_rules(schema: Schema, kind: str) -> Schema:
    """Put the CEL rules and the bounds they need into a job kind's CRD schema (in place)."""
    fw = FRAMEWORKS[kind]
    spec = schema["properties"]["spec"]
    props = spec["properties"]
    _add(schema, root_rules(fw))
    _add(spec, spec_rules(fw))
    run_policy = props["runPolicy"]["properties"]
    _add(run_policy["managedBy"], [_rule(f"self in {_cel_list(SUPPORTED_MANAGED_BY)}",
                                         "spec.runPolicy.managedBy: Unsupported value: supported values: "
                                         + _quoted(tuple(sorted(SUPPORTED_MANAGED_BY))))])
    _add(run_policy["schedulingPolicy"]["properties"]["queue"],
         [_rule("self == oldSelf", "spec.runPolicy.schedulingPolicy.queue is immutable")])
    specs = props[fw.replica_specs_field]
    specs["maxProperties"] = MAX_REPLICA_TYPES
    _add(specs, replica_map_rules(fw))
    replica = specs["additionalProperties"]
    _add(replica, replica_rules(fw))
    _add(replica["properties"]["replicas"], [_rule("self >= 0", "must be greater than or equal to 0")])
    containers = replica["properties"]["template"]["properties"]["spec"]["properties"]["containers"]
    containers["maxItems"] = MAX_CONTAINERS
    _add(containers, containers_rules(fw))
    if fw is MPI:
        _add(props["slotsPerWorker"], [_rule("self >= 1", "must be greater than or equal to 1")])
        _add(props["mainContainer"], [_rule(f"self == '' || (size(self) <= 63 && self.matches('{_DNS1123_LABEL}'))",
                                            "spec.mainContainer: Invalid value: a lowercase RFC 1123 label must "
                                            "consist of lower case alphanumeric characters or '-', and must start "
                                            "and end with an alphanumeric character")])
    return schema
