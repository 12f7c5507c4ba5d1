"""ServiceAccount tokens: the signing key, the claims, expiry on a fake clock (pure), and the
TokenRequest subresource with the users it makes, authorized by RBAC, through the HTTP API."""
from __future__ import annotations

import asyncio
import json
import os
import stat
from datetime import timedelta
from types import SimpleNamespace

import aiohttp
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.server import protobuf
from phalanx.server.app import ACCESS, make_app, serve
from phalanx.server.tokens import (
    API_AUDIENCES,
    ISSUER,
    Claims,
    InvalidToken,
    TokenSigner,
    check_claims,
    ensure_signing_key,
    key_id,
)
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(60)

ADMIN_TOKEN = "admin-s3cret"
NS = "phalanx-system"
SA_PATH = f"/api/v1/namespaces/{NS}/serviceaccounts"
PODS = "/api/v1/namespaces/default/pods"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
OPERATOR_USER = f"system:serviceaccount:{NS}:phalanx-operator"


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> rsa.RSAPrivateKey:
    return ensure_signing_key(tmp_path_factory.mktemp("key") / "sa.key")


# ---------------------------------------------------------------- the key


def test_the_key_is_made_once_private_and_reused(tmp_path):
    path = tmp_path / "service-account.key"
    first = ensure_signing_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert first.key_size == 2048
    again = ensure_signing_key(path)
    assert key_id(again) == key_id(first)
    assert [p.name for p in tmp_path.iterdir()] == ["service-account.key"]  # no temporary left behind


def test_a_key_that_is_not_rsa_is_refused_by_name(tmp_path):
    path = tmp_path / "sa.key"
    path.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(ValueError, match="sa.key: not an RSA private key"):
        ensure_signing_key(path)


# ---------------------------------------------------------------- claims (pure, fake clock)


def test_claims_are_the_kube_apiservers(key):
    clock = FakeClock()
    signer = TokenSigner(key)
    token, claims = signer.issue(NS, "phalanx-operator", "uid-1", API_AUDIENCES, 3600, clock.now())
    header = jwt.get_unverified_header(token)
    assert header == {"alg": "RS256", "kid": key_id(key), "typ": "JWT"}
    payload = jwt.decode(token, key.public_key(), algorithms=["RS256"], audience=ISSUER,
                         options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
    t = int(clock.now().timestamp())
    assert payload == {"aud": [ISSUER], "exp": t + 3600, "iat": t, "nbf": t, "iss": ISSUER, "jti": claims.jti,
                       "sub": OPERATOR_USER,
                       "kubernetes.io": {"namespace": NS, "serviceaccount": {"name": "phalanx-operator",
                                                                             "uid": "uid-1"}}}
    assert signer.verify_signature(token) == claims


def test_only_our_untampered_tokens_are_ours(key):
    signer = TokenSigner(key)
    token, _ = signer.issue(NS, "sa", "u", API_AUDIENCES, 600, FakeClock().now())
    other = TokenSigner(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert other.verify_signature(token) is None
    head, body, sig = token.split(".")
    forged = jwt.encode({"sub": "system:serviceaccount:x:y"}, "k" * 32, algorithm="HS256")
    # One character inside the signature changed: six bits of it (its last characters carry padding bits a
    # decoder drops, so changing those may change nothing: 1 run in 256 did).
    tampered = sig[:10] + ("B" if sig[10] == "A" else "A") + sig[11:]
    for bad in (f"{head}.{body}.{tampered}", f"{head}.{forged.split('.')[1]}.{sig}", forged, "not-a-jwt",
                "a.b.c", ""):
        assert signer.verify_signature(bad) is None, bad
    assert TokenSigner(key, issuer="https://elsewhere").verify_signature(token) is None
    # A well-signed token with the wrong shape (no kubernetes.io claim, or sub not matching it) is not one either.
    odd = jwt.encode({"iss": ISSUER, "sub": "system:serviceaccount:a:b", "iat": 1, "nbf": 1, "exp": 2}, key,
                     algorithm="RS256")
    assert signer.verify_signature(odd) is None
    lying = jwt.encode({"iss": ISSUER, "sub": "system:serviceaccount:kube-system:admin", "iat": 1, "nbf": 1,
                        "exp": 2, "kubernetes.io": {"namespace": "a", "serviceaccount": {"name": "b", "uid": ""}}},
                       key, algorithm="RS256")
    assert signer.verify_signature(lying) is None


def test_expiry_and_not_before_with_a_minutes_leeway():
    clock = FakeClock()
    t = int(clock.now().timestamp())
    c = Claims(NS, "sa", "u", API_AUDIENCES, t, t, t + 600)
    assert check_claims(c, clock.now(), API_AUDIENCES) == API_AUDIENCES
    clock.advance(600 + 60)
    check_claims(c, clock.now(), API_AUDIENCES)  # the last second of the leeway
    clock.advance(1)
    with pytest.raises(InvalidToken, match="^service account token has expired$"):
        check_claims(c, clock.now(), API_AUDIENCES)
    early = FakeClock(clock.now() - timedelta(seconds=2000))
    with pytest.raises(InvalidToken, match="^service account token is not valid yet$"):
        check_claims(c, early.now(), API_AUDIENCES)


def test_a_token_for_another_audience_does_not_open_the_api():
    t = int(FakeClock().now().timestamp())
    c = Claims(NS, "sa", "u", ("vault", "other"), t, t, t + 600)
    with pytest.raises(InvalidToken) as e:
        check_claims(c, FakeClock().now(), API_AUDIENCES)
    assert str(e.value) == (f'token audiences ["vault" "other"] is invalid for the target audiences ["{ISSUER}"]')
    assert check_claims(c, FakeClock().now(), ("other", "x")) == ("other",)


# ---------------------------------------------------------------- through the API


@pytest.fixture
async def api(tmp_path):
    clock = FakeClock()
    store = Store(None, clock, admission=admit, history_size=200)
    app = make_app(LocalClient(store), ADMIN_TOKEN, clock=clock, signing_key=tmp_path / "sa.key")
    runner, url = await serve(app)
    session = aiohttp.ClientSession()
    try:
        yield SimpleNamespace(url=url, store=store, clock=clock, session=session, access=app[ACCESS],
                              key=tmp_path / "sa.key")
    finally:
        await session.close()
        await runner.cleanup()


async def call(api, method: str, path: str, body=None, token: str | None = ADMIN_TOKEN,
               headers: dict | None = None, data: bytes | None = None):
    hdrs = {"Authorization": f"Bearer {token}"} if token is not None else {}
    hdrs.update(headers or {})
    async with api.session.request(method, api.url + path, json=body, data=data, headers=hdrs) as resp:
        text = await resp.text()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text


async def service_account(api, name: str = "phalanx-operator") -> dict:
    status, body = await call(api, "POST", SA_PATH, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                     "metadata": {"name": name, "namespace": NS}})
    assert status == 201, body
    return body


async def grant(api, rules: list[dict], name: str = "phalanx-operator") -> None:
    cr = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
          "rules": rules}
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
           "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}]}
    for path, obj in ((f"{RBAC}/clusterroles", cr), (f"{RBAC}/clusterrolebindings", crb)):
        status, body = await call(api, "POST", path, obj)
        assert status == 201, body


async def token_for(api, name: str = "phalanx-operator", spec: dict | None = None) -> str:
    status, body = await call(api, "POST", f"{SA_PATH}/{name}/token",
                              {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": spec or {}})
    assert status == 201, body
    return body["status"]["token"]


async def eventually(api, method: str, path: str, token: str, want: int, timeout: float = 5.0):
    """The informers see a change within moments: wait for the answer to become ``want``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        status, body = await call(api, method, path, token=token)
        if status == want:
            return body
        assert asyncio.get_running_loop().time() < deadline, (status, body)
        await asyncio.sleep(0.02)


async def test_token_request_as_kubectl_create_token_sends_it(api):
    sa = await service_account(api)
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token",
                              {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                               "metadata": {"creationTimestamp": None},
                               "spec": {"audiences": None, "expirationSeconds": None, "boundObjectRef": None},
                               "status": {"token": "", "expirationTimestamp": None}})
    assert status == 201, body
    now = api.clock.now()
    assert body == {
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": "phalanx-operator", "namespace": NS, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"audiences": [ISSUER], "expirationSeconds": 3600, "boundObjectRef": None},
        "status": {"token": body["status"]["token"], "expirationTimestamp": "2026-01-01T01:00:00Z"}}
    claims = jwt.decode(body["status"]["token"], options={"verify_signature": False})
    assert claims["kubernetes.io"]["serviceaccount"] == {"name": "phalanx-operator", "uid": sa["metadata"]["uid"]}
    assert claims["exp"] == int(now.timestamp()) + 3600
    assert stat.S_IMODE(os.stat(api.key).st_mode) == 0o600


async def test_token_request_errors_in_the_apiservers_words(api):
    status, body = await call(api, "POST", f"{SA_PATH}/nobody/token", {"spec": {}})
    assert (status, body["message"], body["details"]) == (404, 'serviceaccounts "nobody" not found',
                                                          {"name": "nobody", "kind": "serviceaccounts"})
    await service_account(api)
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token", {"spec": {"expirationSeconds": 300}})
    assert status == 422 and body["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 300: may not '
        'specify a duration less than 10 minutes')
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                                          "message": "Invalid value: 300: may not specify a duration less than 10 "
                                                     "minutes"}]
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token",
                              {"spec": {"expirationSeconds": (1 << 32) + 1}})
    assert status == 422 and body["message"].endswith("may not specify a duration larger than 2^32 seconds")
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token",
                              {"metadata": {"name": "other"}, "spec": {}})
    assert status == 422 and body["message"] == (
        'TokenRequest.authentication.k8s.io "phalanx-operator" is invalid: metadata.name: Invalid value: "other": '
        'must match the service account name if specified')
    for method in ("GET", "PUT", "DELETE"):
        status, _ = await call(api, method, f"{SA_PATH}/phalanx-operator/token", {})
        assert status == 405, method
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token",
                              {"spec": {"expirationSeconds": 600, "audiences": ["vault"]}})
    assert status == 201 and body["spec"]["audiences"] == ["vault"]


async def test_token_request_as_protobuf_as_kubectls_typed_client_sends_it(api):
    await service_account(api)
    tr = protobuf.message_class("k8s.io.api.authentication.v1.TokenRequest")()
    tr.spec.expirationSeconds = 1200
    unknown = protobuf.message_class("k8s.io.apimachinery.pkg.runtime.Unknown")()
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "authentication.k8s.io/v1", "TokenRequest"
    unknown.raw = tr.SerializeToString()
    status, body = await call(api, "POST", f"{SA_PATH}/phalanx-operator/token",
                              data=protobuf.MAGIC + unknown.SerializeToString(),
                              headers={"Content-Type": protobuf.MEDIA_TYPE})
    assert status == 201, body
    assert body["spec"]["expirationSeconds"] == 1200


async def test_a_service_account_token_is_that_user_and_rbac_decides(api):
    await service_account(api)
    token = await token_for(api)
    # Discovery and health for any authenticated user (the bootstrap policy).
    for path in ("/api", "/api/v1", "/apis", "/apis/kubeflow.org/v1", "/version", "/healthz", "/openapi/v3"):
        status, _ = await call(api, "GET", path, token=token)
        assert status == 200, path
    status, body = await call(api, "GET", PODS, token=token)
    assert status == 403 and body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'pods is forbidden: User "{OPERATOR_USER}" cannot list resource "pods" in API group "" in '
                   'the namespace "default"', "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403}
    await grant(api, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "get"]}])
    await eventually(api, "GET", PODS, token, 200)
    # A watch is authorized as watch, a write as its verb, a subresource by name.
    status, body = await call(api, "GET", PODS + "?watch=1&timeoutSeconds=1", token=token)
    assert status == 403 and "cannot watch resource" in body["message"]
    status, body = await call(api, "POST", PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
                              token=token)
    assert status == 403 and body["message"] == (f'pods is forbidden: User "{OPERATOR_USER}" cannot create '
                                                 'resource "pods" in API group "" in the namespace "default"')
    status, body = await call(api, "POST", PODS + "/p/binding", {"target": {"name": "n"}}, token=token)
    assert status == 403 and body["message"].startswith(f'pods "p" is forbidden: User "{OPERATOR_USER}" cannot '
                                                        'create resource "pods/binding"')
    before = api.store.current_rv()
    status, _ = await call(api, "DELETE", PODS, token=token)
    assert status == 403 and api.store.current_rv() == before
    # A change of the roles is seen without a restart.
    status, _ = await call(api, "DELETE", f"{RBAC}/clusterrolebindings/phalanx-operator")
    assert status == 200
    await eventually(api, "GET", PODS, token, 403)


async def test_a_binding_to_a_missing_role_is_the_reason(api):
    await service_account(api)
    token = await token_for(api)
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
           "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}]}
    assert (await call(api, "POST", f"{RBAC}/clusterrolebindings", crb))[0] == 201
    body = await eventually(api, "GET", "/api/v1/nodes/n1", token, 403)
    status, body = await call(api, "GET", "/api/v1/nodes/n1", token=token)
    assert body["message"] == (f'nodes "n1" is forbidden: User "{OPERATOR_USER}" cannot get resource "nodes" in '
                               'API group "" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io '
                               '"gone" not found')


async def test_expired_deleted_and_recreated_service_accounts_tokens_are_refused(api):
    await service_account(api)
    await grant(api, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    token = await token_for(api, spec={"expirationSeconds": 600})
    await eventually(api, "GET", PODS, token, 200)
    api.clock.advance(600 + 61)
    status, body = await call(api, "GET", PODS, token=token)
    assert (status, body["message"]) == (401, "Unauthorized")
    fresh = await token_for(api)
    await eventually(api, "GET", PODS, fresh, 200)
    assert (await call(api, "DELETE", f"{SA_PATH}/phalanx-operator"))[0] == 200
    await eventually(api, "GET", PODS, fresh, 401)
    await service_account(api)  # the same name, another uid
    status, _ = await call(api, "GET", PODS, token=fresh)
    assert status == 401
    await eventually(api, "GET", PODS, await token_for(api), 200)


async def test_no_token_is_anonymous_and_forbidden_a_wrong_one_unauthorized(api):
    status, body = await call(api, "GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", token=None)
    assert status == 403 and body == {  # golden 62
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pytorchjobs.kubeflow.org is forbidden: User "system:anonymous" cannot list resource '
                   '"pytorchjobs" in API group "kubeflow.org" in the namespace "default"',
        "reason": "Forbidden", "details": {"group": "kubeflow.org", "kind": "pytorchjobs"}, "code": 403}
    status, body = await call(api, "GET", "/version", token=None)
    assert (status, body["message"]) == (403, 'forbidden: User "system:anonymous" cannot get path "/version"')
    status, body = await call(api, "GET", "/version", token="not-a-valid-token")
    assert status == 401 and body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}  # golden 63
    # Whatever the stored policy grants system:anonymous or system:unauthenticated, nothing is served.
    crb = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "open"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
           "subjects": [{"kind": "Group", "name": "system:unauthenticated"}, {"kind": "User",
                                                                              "name": "system:anonymous"}]}
    assert (await call(api, "POST", f"{RBAC}/clusterrolebindings", crb))[0] == 201
    await asyncio.sleep(0.1)
    assert (await call(api, "GET", PODS, token=None))[0] == 403


async def test_the_admin_token_never_starts_the_rbac_machinery(api):
    for path in (PODS, "/version", "/api", f"{RBAC}/clusterroles"):
        assert (await call(api, "GET", path))[0] == 200
    assert not api.access._informers  # the admin's requests cost a constant-time compare, nothing more


async def test_self_subject_access_review_as_kubectl_auth_can_i(api):
    await service_account(api)
    await grant(api, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])
    token = await token_for(api)
    await eventually(api, "GET", PODS, token, 200)
    path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    ask = {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
           "metadata": {"creationTimestamp": None},
           "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}, "status": {}}
    status, body = await call(api, "POST", path, ask, token=token)
    assert status == 201 and body["status"] == {
        "allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "phalanx-operator" of ClusterRole '
                                   '"phalanx-operator" to ServiceAccount "phalanx-operator/phalanx-system"'}
    assert body["spec"] == ask["spec"]
    ask["spec"]["resourceAttributes"]["verb"] = "delete"
    status, body = await call(api, "POST", path, ask, token=token)
    assert status == 201 and body["status"] == {"allowed": False}
    status, body = await call(api, "POST", path, {"spec": {"nonResourceAttributes": {"path": "/api",
                                                                                     "verb": "get"}}}, token=token)
    assert body["status"]["allowed"] is True
    status, body = await call(api, "POST", path, {"spec": {}}, token=token)
    assert status == 422 and "exactly one of nonResourceAttributes or resourceAttributes" in body["message"]


async def test_token_review_and_self_subject_review(api):
    sa = await service_account(api)
    token = await token_for(api)
    path = "/apis/authentication.k8s.io/v1/tokenreviews"
    status, body = await call(api, "POST", path, {"spec": {"token": token}})
    assert status == 201 and body["status"]["authenticated"] is True
    assert body["status"]["user"]["username"] == OPERATOR_USER and body["status"]["audiences"] == [ISSUER]
    assert body["status"]["user"]["uid"] == sa["metadata"]["uid"]
    status, body = await call(api, "POST", path, {"spec": {"token": "garbage"}})
    assert body["status"] == {"user": {}, "error": "invalid bearer token"}
    status, body = await call(api, "POST", path, {"spec": {"token": token, "audiences": ["vault"]}})
    assert body["status"]["error"] == (f'[invalid bearer token, token audiences ["{ISSUER}"] is invalid for the '
                                       'target audiences ["vault"]]')
    status, _ = await call(api, "POST", path, {"spec": {"token": token}}, token=token)
    assert status == 403  # reviewing tokens is not for everyone
    status, body = await call(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {}, token=token)
    assert status == 201 and body["status"]["userInfo"]["username"] == OPERATOR_USER
    assert body["status"]["userInfo"]["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}",
                                                    "system:authenticated"]


async def test_discovery_lists_the_token_subresource_and_the_review_groups(api):
    _, core = await call(api, "GET", "/api/v1")
    assert {"name": "serviceaccounts/token", "singularName": "", "namespaced": True, "group": "authentication.k8s.io",
            "version": "v1", "kind": "TokenRequest", "verbs": ["create"]} in core["resources"]
    _, groups = await call(api, "GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert "authentication.k8s.io" in names and "authorization.k8s.io" in names
    _, authz = await call(api, "GET", "/apis/authorization.k8s.io/v1")
    assert [r["name"] for r in authz["resources"]] == ["selfsubjectaccessreviews"]
    assert (await call(api, "GET", "/apis/authorization.k8s.io/v1/nothing"))[0] == 404
