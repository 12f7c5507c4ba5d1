"""ValidatingWebhookConfiguration and MutatingWebhookConfiguration (admissionregistration.k8s.io/v1).

Their shape, checked and defaulted as the apiserver does (field path and rule
in every error, its wording), and the parsed ``Webhook`` the API server calls.
"""
from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass
from typing import Any

from phalanx.objects.errors import ApiError, FieldError, json_type_name
from phalanx.objects.names import is_dns1035_label, is_dns1123_subdomain
from phalanx.objects.selectors import EVERYTHING, LabelSelector, label_selector_from_object

Obj = dict[str, Any]

VALIDATING = "ValidatingWebhookConfiguration"
MUTATING = "MutatingWebhookConfiguration"
KINDS = (VALIDATING, MUTATING)
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
SCOPES = ("*", "Cluster", "Namespaced")  # supported-value lists sorted, as Go prints them
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
REINVOCATION = ("IfNeeded", "Never")
REVIEW_VERSIONS = ("v1", "v1beta1")
DEFAULT_TIMEOUT = 10
MAX_TIMEOUT = 30
DEFAULT_SERVICE_PORT = 443


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...]
    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    scope: str = "*"


@dataclass(frozen=True)
class ServiceRef:
    namespace: str
    name: str
    path: str
    port: int


@dataclass(frozen=True)
class Webhook:
    """One webhook of a configuration, defaulted (``configuration`` names its object)."""

    name: str
    configuration: str
    mutating: bool
    rules: tuple[Rule, ...]
    failure_policy: str = "Fail"
    match_policy: str = "Equivalent"
    namespace_selector: LabelSelector = EVERYTHING
    object_selector: LabelSelector = EVERYTHING
    timeout_seconds: int = DEFAULT_TIMEOUT
    review_versions: tuple[str, ...] = ("v1",)
    url: str | None = None
    service: ServiceRef | None = None
    ca_bundle: bytes | None = None
    reinvocation: str = "Never"
    match_conditions: tuple[tuple[str, str], ...] = ()

    @property
    def review_version(self) -> str:
        """The AdmissionReview version sent: the first listed that the server speaks."""
        return next(v for v in self.review_versions if v in REVIEW_VERSIONS)


# ---------------------------------------------------------------- defaults

def default_configuration(obj: Obj, old: Obj | None = None) -> None:
    """SetDefaults_ValidatingWebhook / _MutatingWebhook / _Rule / _ServiceReference (v1)."""
    hooks = obj.get("webhooks")
    if not isinstance(hooks, list):
        return
    for hook in hooks:
        if not isinstance(hook, dict):
            continue
        hook.setdefault("failurePolicy", "Fail")
        hook.setdefault("matchPolicy", "Equivalent")
        for sel in ("namespaceSelector", "objectSelector"):
            if hook.get(sel) is None:
                hook[sel] = {}
        hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT)
        if obj.get("kind") == MUTATING:
            hook.setdefault("reinvocationPolicy", "Never")
        for rule in hook.get("rules") or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")
        service = (hook.get("clientConfig") or {}).get("service") if isinstance(hook.get("clientConfig"),
                                                                                 dict) else None
        if isinstance(service, dict):
            service.setdefault("port", DEFAULT_SERVICE_PORT)


# ---------------------------------------------------------------- validation

def validate_configuration(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """ValidateValidatingWebhookConfiguration / ValidateMutatingWebhookConfiguration (v1)."""
    hooks = obj.get("webhooks")
    if hooks is None:
        return []
    if not isinstance(hooks, list):
        return [_type("webhooks", hooks, "array")]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, hook in enumerate(hooks):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errs.append(_type(path, hook, "object"))
            continue
        errs += _validate_hook(hook, path, obj.get("kind") == MUTATING)
        name = hook.get("name")
        if isinstance(name, str) and name:
            if name in seen:
                errs.append(FieldError(f"{path}.name", "Duplicate", value=name))
            seen.add(name)
    return errs


def _type(path: str, value: Any, expected: str) -> FieldError:
    actual = json_type_name(value)
    return FieldError(path, "Invalid", f'{path} in body must be of type {expected}: "{actual}"', actual)


def _validate_hook(hook: Obj, path: str, mutating: bool) -> list[FieldError]:
    errs = _fully_qualified_name(hook.get("name"), f"{path}.name")
    rules = hook.get("rules")
    if rules is not None and not isinstance(rules, list):
        errs.append(_type(f"{path}.rules", rules, "array"))
    else:
        for j, rule in enumerate(rules or []):
            errs += _validate_rule(rule, f"{path}.rules[{j}]")
    errs += _enum(hook, "failurePolicy", FAILURE_POLICIES, path)
    errs += _enum(hook, "matchPolicy", MATCH_POLICIES, path)
    if mutating:
        errs += _enum(hook, "reinvocationPolicy", REINVOCATION, path)
    if hook.get("sideEffects") is None:
        errs.append(FieldError(f"{path}.sideEffects", "Required", "must specify one of None, NoneOnDryRun"))
    else:
        errs += _enum(hook, "sideEffects", SIDE_EFFECTS, path)
    timeout = hook.get("timeoutSeconds")
    if timeout is not None:
        if not isinstance(timeout, int) or isinstance(timeout, bool):
            errs.append(_type(f"{path}.timeoutSeconds", timeout, "integer"))
        elif not 1 <= timeout <= MAX_TIMEOUT:
            errs.append(FieldError(f"{path}.timeoutSeconds", "Invalid",
                                   "the timeout value must be between 1 and 30 seconds", timeout))
    errs += _review_versions(hook.get("admissionReviewVersions"), f"{path}.admissionReviewVersions")
    for sel in ("namespaceSelector", "objectSelector"):
        errs += _selector(hook.get(sel), f"{path}.{sel}")
    errs += _client_config(hook.get("clientConfig"), f"{path}.clientConfig")
    errs += _match_conditions(hook.get("matchConditions"), f"{path}.matchConditions")
    return errs


def _fully_qualified_name(name: Any, path: str) -> list[FieldError]:
    if name is None or name == "":
        return [FieldError(path, "Required")]
    if not isinstance(name, str):
        return [_type(path, name, "string")]
    problems = is_dns1123_subdomain(name)
    if problems:
        return [FieldError(path, "Invalid", "; ".join(problems), name)]
    if len(name.split(".")) < 3:
        return [FieldError(path, "Invalid", "should be a domain with at least three segments separated by dots",
                           name)]
    return []


def _enum(obj: Obj, field: str, allowed: tuple[str, ...], path: str) -> list[FieldError]:
    value = obj.get(field)
    if value is None or value in allowed:
        return []
    return [FieldError(f"{path}.{field}", "NotSupported", value=value if isinstance(value, str)
                       else json_type_name(value), supported=allowed)]


def _strings(value: Any, path: str) -> tuple[list[str], list[FieldError]]:
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [_type(path, value, "array")]
    errs = [_type(f"{path}[{k}]", v, "string") for k, v in enumerate(value) if not isinstance(v, str)]
    return [v for v in value if isinstance(v, str)], errs


def _validate_rule(rule: Any, path: str) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [_type(path, rule, "object")]
    errs: list[FieldError] = []
    ops, e = _strings(rule.get("operations"), f"{path}.operations")
    errs += e
    if not ops and not e:
        errs.append(FieldError(f"{path}.operations", "Required"))
    if len(ops) > 1 and "*" in ops:
        errs.append(FieldError(f"{path}.operations", "Invalid", "if '*' is present, must not specify other "
                                                                 "operations", _go_list(ops)))
    for k, op in enumerate(ops):
        if op != "*" and op not in OPERATIONS:
            errs.append(FieldError(f"{path}.operations[{k}]", "NotSupported", value=op,
                                   supported=("*", *sorted(OPERATIONS))))
    for field, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values, e = _strings(rule.get(field), f"{path}.{field}")
        errs += e
        if not values and not e:
            errs.append(FieldError(f"{path}.{field}", "Required"))
        if len(values) > 1 and "*" in values:
            errs.append(FieldError(f"{path}.{field}", "Invalid", f"if '*' is present, must not specify other {what}",
                                   _go_list(values)))
        if field == "apiVersions":
            errs += [FieldError(f"{path}.apiVersions[{k}]", "Required", "version must not be empty")
                     for k, v in enumerate(values) if v == ""]
    resources, e = _strings(rule.get("resources"), f"{path}.resources")
    errs += e
    if not resources and not e:
        errs.append(FieldError(f"{path}.resources", "Required"))
    errs += _validate_resources(resources, f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errs.append(FieldError(f"{path}.scope", "NotSupported", value=scope if isinstance(scope, str)
                               else json_type_name(scope), supported=SCOPES))
    return errs


def _validate_resources(resources: list[str], path: str) -> list[FieldError]:
    """validateResources: ``*/*`` alone; ``res/*`` and ``*/sub`` cover what they name."""
    errs: list[FieldError] = []
    if len(resources) > 1 and "*/*" in resources:
        errs.append(FieldError(path, "Invalid", "if '*/*' is present, must not specify other resources",
                               _go_list(resources)))
    with_sub = {r.split("/", 1)[0] for r in resources if r.endswith("/*")}
    any_res = {r.split("/", 1)[1] for r in resources if r.startswith("*/") and "/" in r}
    for k, res in enumerate(resources):
        where = f"{path}[{k}]"
        if res == "":
            errs.append(FieldError(where, "Required"))
            continue
        if res == "*/*":
            continue
        main, _, sub = res.partition("/")
        if main == "" or ("/" in res and sub == ""):
            errs.append(FieldError(where, "Invalid", "resource and subresource must not be empty", res))
            continue
        if sub and sub != "*" and main in with_sub:
            errs.append(FieldError(where, "Invalid", f"if '{main}/*' is present, must not specify {res}", res))
        if sub and main != "*" and sub in any_res:
            errs.append(FieldError(where, "Invalid", f"if '*/{sub}' is present, must not specify {res}", res))
    if "*" in resources and any("/" not in r and r != "*" for r in resources):
        errs.append(FieldError(path, "Invalid", "if '*' is present, must not specify other resources without "
                                                "subresources", _go_list(resources)))
    return errs


def _review_versions(value: Any, path: str) -> list[FieldError]:
    versions, errs = _strings(value, path)
    if errs:
        return errs
    if not versions:
        return [FieldError(path, "Required", "must specify one of v1, v1beta1")]
    seen: set[str] = set()
    for k, v in enumerate(versions):
        if is_dns1035_label(v):
            errs.append(FieldError(f"{path}[{k}]", "Invalid", "; ".join(is_dns1035_label(v)), v))
        if v in seen:
            errs.append(FieldError(f"{path}[{k}]", "Invalid", "duplicate version", v))
        seen.add(v)
    if not any(v in REVIEW_VERSIONS for v in versions):
        errs.append(FieldError(path, "Invalid", "must include at least one of v1, v1beta1", _go_list(versions)))
    return errs


def _selector(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [_type(path, value, "object")]
    try:
        label_selector_from_object(value)
    except ApiError as e:
        return [FieldError(path, "Invalid", e.message.removeprefix("label selector "), json_type_name(value))]
    return []


def _client_config(cc: Any, path: str) -> list[FieldError]:
    if cc is None:
        return [FieldError(path, "Required", "exactly one of url or service is required")]
    if not isinstance(cc, dict):
        return [_type(path, cc, "object")]
    url, service = cc.get("url"), cc.get("service")
    errs: list[FieldError] = []
    if (url is None) == (service is None):
        errs.append(FieldError(path, "Required", "exactly one of url or service is required"))
    if url is not None:
        errs += _webhook_url(url, f"{path}.url")
    if service is not None:
        errs += _service(service, f"{path}.service")
    bundle = cc.get("caBundle")
    if bundle is not None and _ca_bundle(bundle) is None:
        errs.append(FieldError(f"{path}.caBundle", "Invalid", "must be base64-encoded PEM certificates",
                               json_type_name(bundle) if not isinstance(bundle, str) else "<bytes>"))
    return errs


def _webhook_url(url: Any, path: str) -> list[FieldError]:
    """ValidateWebhookURL (forceHttps)."""
    if not isinstance(url, str):
        return [_type(path, url, "string")]
    try:
        u = urllib.parse.urlsplit(url)
        _ = u.port  # raises on a bad port
    except ValueError as e:
        return [FieldError(path, "Invalid", f"url must be a valid URL: {e}", url)]
    if u.scheme != "https":
        return [FieldError(path, "Invalid", "'https' is the only allowed URL scheme", u.scheme)]
    if not u.hostname:
        return [FieldError(path, "Invalid", "host must be specified", u.netloc)]
    if u.username is not None or u.password is not None:
        return [FieldError(path, "Invalid", "user information is not permitted in the URL", u.netloc)]
    if u.fragment or url.endswith("#"):
        return [FieldError(path, "Invalid", "fragments are not permitted in the URL", u.fragment)]
    if u.query or "?" in url:
        return [FieldError(path, "Invalid", "query parameters are not permitted in the URL", u.query)]
    return []


def _service(svc: Any, path: str) -> list[FieldError]:
    if not isinstance(svc, dict):
        return [_type(path, svc, "object")]
    errs: list[FieldError] = []
    for field in ("name", "namespace"):
        value = svc.get(field)
        if value is None or value == "":
            errs.append(FieldError(f"{path}.{field}", "Required", f"service {field} is required"))
        elif not isinstance(value, str):
            errs.append(_type(f"{path}.{field}", value, "string"))
    p = svc.get("path")
    if p is not None:
        if not isinstance(p, str):
            errs.append(_type(f"{path}.path", p, "string"))
        elif p and not p.startswith("/"):
            errs.append(FieldError(f"{path}.path", "Invalid", "must start with a '/'", p))
    port = svc.get("port")
    if port is not None:
        if not isinstance(port, int) or isinstance(port, bool):
            errs.append(_type(f"{path}.port", port, "integer"))
        elif not 1 <= port <= 65535:
            errs.append(FieldError(f"{path}.port", "Invalid",
                                   "port is not valid: must be between 1 and 65535, inclusive", port))
    return errs


def _match_conditions(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, list):
        return [_type(path, value, "array")]
    errs: list[FieldError] = []
    if len(value) > 64:
        errs.append(FieldError(path, "TooMany", "must have at most 64 items", len(value)))
    names: set[str] = set()
    for k, cond in enumerate(value):
        where = f"{path}[{k}]"
        if not isinstance(cond, dict):
            errs.append(_type(where, cond, "object"))
            continue
        for field in ("name", "expression"):
            v = cond.get(field)
            if v is None or v == "":
                errs.append(FieldError(f"{where}.{field}", "Required"))
            elif not isinstance(v, str):
                errs.append(_type(f"{where}.{field}", v, "string"))
        name = cond.get("name")
        if isinstance(name, str) and name:
            if name in names:
                errs.append(FieldError(f"{where}.name", "Duplicate", value=name))
            names.add(name)
    return errs


def _ca_bundle(value: Any) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


class _GoValue:
    """A value printed as Go's %#v prints it (``[]string{"a", "b"}``), unquoted by FieldError."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _go_list(values: list[str]) -> _GoValue:
    return _GoValue("[]string{" + ", ".join(f'"{v}"' for v in values) + "}")


# ---------------------------------------------------------------- parsed form

def webhooks_of(obj: Obj) -> list[Webhook]:
    """The webhooks of a stored (admitted, hence valid and defaulted) configuration."""
    mutating = obj.get("kind") == MUTATING
    config = str((obj.get("metadata") or {}).get("name") or "")
    out = []
    for hook in obj.get("webhooks") or []:
        cc = hook.get("clientConfig") or {}
        svc = cc.get("service")
        out.append(Webhook(
            name=hook["name"], configuration=config, mutating=mutating,
            rules=tuple(Rule(tuple(r.get("operations") or ()), tuple(r.get("apiGroups") or ()),
                             tuple(r.get("apiVersions") or ()), tuple(r.get("resources") or ()),
                             r.get("scope") or "*") for r in hook.get("rules") or []),
            failure_policy=hook.get("failurePolicy") or "Fail",
            match_policy=hook.get("matchPolicy") or "Equivalent",
            namespace_selector=label_selector_from_object(hook.get("namespaceSelector")),
            object_selector=label_selector_from_object(hook.get("objectSelector")),
            timeout_seconds=int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT),
            review_versions=tuple(hook.get("admissionReviewVersions") or ("v1",)),
            url=cc.get("url"),
            service=ServiceRef(svc["namespace"], svc["name"], svc.get("path") or "",
                               int(svc.get("port") or DEFAULT_SERVICE_PORT)) if isinstance(svc, dict) else None,
            ca_bundle=_ca_bundle(cc.get("caBundle")),
            reinvocation=hook.get("reinvocationPolicy") or "Never",
            match_conditions=tuple((c["name"], c["expression"]) for c in hook.get("matchConditions") or []),
        ))
    return out


def ordered(configurations: list[Obj]) -> list[Webhook]:
    """Every webhook of the configurations, in the order the apiserver calls them:
    configurations by name, then each one's webhooks as listed."""
    configs = sorted(configurations, key=lambda o: str((o.get("metadata") or {}).get("name") or ""))
    return [h for c in configs for h in webhooks_of(c)]


__all__ = ["KINDS", "MUTATING", "VALIDATING", "Rule", "ServiceRef", "Webhook", "default_configuration",
           "ordered", "validate_configuration", "webhooks_of"]
