"""A fake world for the pure job reconciler: it applies Plans the way the store,
the local network and the scheduler would, so tests can drive a job step by
step with hand-made pod and PodGroup states. Imported by the other
``test_job_*`` / ``test_framework_*`` files; its own tests check the world.
"""
from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import Plan, ReconcileOptions, reconcile
from phalanx.objects.clock import format_time

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
T0 = format_time(NOW)
JOB_UID = "11111111-2222-3333-4444-555555555555"
IMAGE = "busybox:1.37.0-glibc"
COMMAND = ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"]


def _template(container: str, port_name: str, port: int) -> dict:
    return {"spec": {"containers": [{
        "name": container, "image": IMAGE, "imagePullPolicy": "IfNotPresent", "command": list(COMMAND),
        "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
        "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}],
    }]}}


def pytorch_job(name: str = "pytest", master: int | None = 1, workers: int | None = 3, policy: str = "OnFailure",
                backoff: int | None = 3, **run_policy) -> dict:
    """The seed PyTorchJob as admission stores it (docs/SEMANTICS.md S1: defaults persisted)."""
    specs = {}
    if master is not None:
        specs["Master"] = {"replicas": master, "restartPolicy": policy,
                           "template": _template("pytorch", "pytorchjob-port", 23456)}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "restartPolicy": policy,
                           "template": _template("pytorch", "pytorchjob-port", 23456)}
    rp = {"cleanPodPolicy": "None", "suspend": False, **run_policy}
    if backoff is not None:
        rp["backoffLimit"] = backoff
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                     "creationTimestamp": T0},
        "spec": {"pytorchReplicaSpecs": specs, "runPolicy": rp, "nprocPerNode": "auto"},
    }


def tf_job(name: str = "tftest", ps: int | None = 1, workers: int | None = 3, ps_policy: str = "Always",
           worker_policy: str = "OnFailure", backoff: int | None = 3, extra: dict | None = None, **run_policy) -> dict:
    """The seed TFJob as admission stores it."""
    specs = {}
    if ps is not None:
        specs["PS"] = {"replicas": ps, "restartPolicy": ps_policy,
                       "template": _template("tensorflow", "tfjob-port", 2222)}
    if workers is not None:
        specs["Worker"] = {"replicas": workers, "restartPolicy": worker_policy,
                           "template": _template("tensorflow", "tfjob-port", 2222)}
    for rtype, n in (extra or {}).items():
        specs[rtype] = {"replicas": n, "restartPolicy": "Never", "template": _template("tensorflow", "tfjob-port", 2222)}
    rp = {"cleanPodPolicy": "None", "suspend": False, **run_policy}
    if backoff is not None:
        rp["backoffLimit"] = backoff
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": name, "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                     "creationTimestamp": T0},
        "spec": {"tfReplicaSpecs": specs, "runPolicy": rp},
    }


class World:
    """Objects as the store would hold them after applying plans."""

    def __init__(self, job: dict, options: ReconcileOptions | None = None, now: datetime = NOW,
                 taken_ports: set[int] | None = None) -> None:
        self.job = copy.deepcopy(job)
        self.fw = get_framework(job["kind"])
        self.options = options or ReconcileOptions()
        self.now = now
        self.pods: dict[str, dict] = {}
        self.services: dict[str, dict] = {}
        self.podgroup: dict | None = None
        self.events: list[tuple[str, str, str]] = []
        self.plans: list[Plan] = []
        self.deleted_job = False
        self._uid = 0
        self._ip = 0
        self.taken_ports: set[int] = set(taken_ports or ())

    # -- time and reconcile -----------------------------------------------------

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def reconcile(self) -> Plan:
        inputs = (copy.deepcopy(self.job), [copy.deepcopy(p) for p in self.pods.values()],
                  [copy.deepcopy(s) for s in self.services.values()], copy.deepcopy(self.podgroup))
        before = copy.deepcopy(inputs)
        plan = reconcile(*inputs, self.now, self.fw, self.options)
        assert inputs == before, "reconcile must not change its inputs (they are the informers' cache)"
        return plan

    def step(self) -> Plan:
        plan = self.reconcile()
        self.apply(plan)
        return plan

    def settle(self, max_steps: int = 4) -> list[Plan]:
        """Reconcile and apply until a plan is empty; the fixpoint must come fast."""
        plans = []
        for _ in range(max_steps):
            p = self.step()
            plans.append(p)
            if p.is_empty():
                return plans
        raise AssertionError(f"no fixpoint after {max_steps} steps: {plans[-1]}")

    # -- applying a plan as the store would ------------------------------------------

    def _new_uid(self) -> str:
        self._uid += 1
        return f"uid-{self._uid}"

    def apply(self, plan: Plan) -> None:
        self.plans.append(plan)
        if plan.status is not None:
            self.job["status"] = copy.deepcopy(plan.status)
            self.job["metadata"]["resourceVersion"] = str(int(self.job["metadata"]["resourceVersion"]) + 1)
        if plan.podgroup_delete:
            self.podgroup = None
        if plan.podgroup_create is not None:
            assert self.podgroup is None, "PodGroup created twice"
            pg = copy.deepcopy(plan.podgroup_create)
            pg["metadata"]["uid"] = self._new_uid()
            self.podgroup = pg
        if plan.podgroup_update is not None:
            self.podgroup = copy.deepcopy(plan.podgroup_update)
        for n in plan.delete_pods:
            pod = self.pods.get(n)
            assert pod is not None, f"deleting missing pod {n}"
            assert not pod["metadata"].get("deletionTimestamp"), f"deleting {n} twice"
            if pod["spec"].get("nodeName") and pod["status"]["phase"] not in ("Succeeded", "Failed"):
                pod["metadata"]["deletionTimestamp"] = format_time(self.now)  # graceful
            else:
                del self.pods[n]
        for names, key in ((plan.stop_restarting, "phalanx.dev/no-restart"),
                           (plan.stop_failure_restarts, "phalanx.dev/no-restart-on-failure")):
            for n in names:
                anns = self.pods[n]["metadata"].setdefault("annotations", {})
                assert anns.get(key) != "true", f"{n} marked {key} twice"
                anns[key] = "true"
        for n in plan.delete_services:
            assert self.services.pop(n, None) is not None, f"deleting missing service {n}"
        for svc in plan.create_services:
            svc = copy.deepcopy(svc)
            n = svc["metadata"]["name"]
            assert n not in self.services, f"service {n} created twice"
            svc["metadata"]["uid"] = self._new_uid()
            if self.options.local_runtime:
                self._allocate(svc)
            self.services[n] = svc
        for pod in plan.create_pods:
            pod = copy.deepcopy(pod)
            n = pod["metadata"]["name"]
            assert n not in self.pods, f"pod {n} created twice"
            pod["metadata"]["uid"] = self._new_uid()
            pod["status"] = {"phase": "Pending"}
            self.pods[n] = pod
        self.events.extend(plan.events)
        if plan.delete_job:
            self.deleted_job = True

    def _allocate(self, svc: dict) -> None:
        """The local network's admission plugin: an address and host ports."""
        self._ip += 1
        ports = {}
        for p in svc["spec"].get("ports", []):
            port = p["port"]
            while port in self.taken_ports:
                port = port + 1 if port < 65535 else 30000
            self.taken_ports.add(port)
            ports[p["name"]] = port
        ann = svc["metadata"].setdefault("annotations", {})
        ann[ANNOTATION_ADDRESS] = f"127.0.1.{self._ip}"
        ann[ANNOTATION_HOST_PORTS] = json.dumps(ports)

    # -- the scheduler and node agent, by hand ---------------------------------------

    def admit(self, phase: str = "Inqueue") -> None:
        assert self.podgroup is not None
        self.podgroup.setdefault("status", {})["phase"] = phase

    def bind_all(self, node: str = "las1") -> None:
        for p in self.pods.values():
            p["spec"]["nodeName"] = node

    def _container(self, pod: dict, state: dict, restarts: int = 0, last: dict | None = None) -> None:
        name = pod["spec"]["containers"][0]["name"]
        cs = {"name": name, "ready": "running" in state, "restartCount": restarts, "state": state,
              "lastState": last or {}}
        pod["status"]["containerStatuses"] = [cs]

    def running(self, *names: str, restarts: int = 0, last_exit: int | None = None) -> None:
        for n in names:
            pod = self.pods[n]
            pod["spec"].setdefault("nodeName", "las1")
            pod["status"]["phase"] = "Running"
            last = {"terminated": {"exitCode": last_exit, "reason": "Error" if last_exit else "Completed"}} \
                if last_exit is not None else None
            self._container(pod, {"running": {"startedAt": format_time(self.now)}}, restarts, last)

    def init(self, *names: str) -> None:
        """Pending with the init container running (kubectl: Init:0/1)."""
        for n in names:
            pod = self.pods[n]
            pod["spec"].setdefault("nodeName", "las1")
            pod["status"]["phase"] = "Pending"
            self._container(pod, {"waiting": {"reason": "PodInitializing"}})

    def crashloop(self, n: str, restarts: int, exit_code: int = 1) -> None:
        pod = self.pods[n]
        pod["status"]["phase"] = "Running"
        self._container(pod, {"waiting": {"reason": "CrashLoopBackOff"}}, restarts,
                        {"terminated": {"exitCode": exit_code, "reason": "Error"}})

    def succeeded(self, *names: str) -> None:
        for n in names:
            pod = self.pods[n]
            pod["spec"].setdefault("nodeName", "las1")
            pod["status"]["phase"] = "Succeeded"
            self._container(pod, {"terminated": {"exitCode": 0, "reason": "Completed"}})

    def failed(self, n: str, exit_code: int | None = 1, restarts: int = 0) -> None:
        pod = self.pods[n]
        pod["spec"].setdefault("nodeName", "las1")
        pod["status"]["phase"] = "Failed"
        if exit_code is None:  # evicted: the container never terminated
            pod["status"]["reason"] = "Evicted"
            pod["status"].pop("containerStatuses", None)
        else:
            self._container(pod, {"terminated": {"exitCode": exit_code, "reason": "Error"}}, restarts)

    def finish_deletions(self) -> None:
        """The node agent finalises graceful deletions."""
        for n in [n for n, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]:
            del self.pods[n]

    # -- reading ----------------------------------------------------------------------

    @property
    def status(self) -> dict:
        return self.job.get("status", {})

    def conditions(self) -> list[tuple[str, str, str]]:
        return [(c["type"], c["status"], c["reason"]) for c in self.status.get("conditions", [])]

    def state(self) -> str:
        conds = self.status.get("conditions", [])
        return conds[-1]["type"] if conds else ""


def env_of(pod: dict, container: int = 0) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][container].get("env", [])}


# ---- the world itself -------------------------------------------------------------------


def test_world_allocates_the_declared_port_when_free_and_another_when_taken():
    w = World(pytorch_job(), taken_ports={23456})
    w.step()
    w.admit()
    w.step()
    ports = {n: json.loads(s["metadata"]["annotations"][ANNOTATION_HOST_PORTS])["pytorchjob-port"]
             for n, s in w.services.items()}
    assert len(set(ports.values())) == 4 and 23456 not in ports.values()


def test_world_refuses_double_creation():
    w = World(pytorch_job())
    plan = w.reconcile()
    w.apply(plan)
    try:
        w.apply(plan)
    except AssertionError as e:
        assert "created twice" in str(e)
    else:
        raise AssertionError("a PodGroup created twice must be caught")
