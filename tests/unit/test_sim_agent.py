"""The simulated node agent against the real pod state machine (podstate.decide):
restart policies and CrashLoopBackOff timing in virtual seconds, init containers,
deletion with grace, deadlines, startup latency and behaviour annotations."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.node.agent import ensure_node
from phalanx.sim.agent import SimAgent, SimAgentConfig, SimNode
from phalanx.sim.loop import VirtualClock, run_virtual
from phalanx.sim.runner import counter_uids
from phalanx.store.store import Store


def pod(name: str, command: list[str] | None = None, policy: str = "OnFailure", annotations: dict | None = None,
        init: list[dict] | None = None, node: str = "n1", **spec: Any) -> dict:
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
         "spec": {"nodeName": node, "restartPolicy": policy,
                  "containers": [{"name": "main", "image": "busybox", "command": command or ["sleep", "5"]}],
                  **spec}}
    if init:
        p["spec"]["initContainers"] = init
    return p


def summary(p: dict) -> tuple:
    st = p.get("status") or {}
    cs = (st.get("containerStatuses") or [{}])[0]
    state = cs.get("state") or {}
    kind = next(iter(state), "")
    detail = (state.get(kind) or {}).get("reason") or (state.get(kind) or {}).get("exitCode") or ""
    return st.get("phase"), kind, detail, cs.get("restartCount", 0)


async def simulate(scenario: Callable[[LocalClient, Any], Awaitable[None]], horizon: float,
                   config: SimAgentConfig | None = None, watch: str = "p",
                   exits: list | None = None) -> list[tuple[float, tuple]]:
    """Run the agent over a store; return (virtual time, summary) of pod ``watch`` whenever it changes
    (and note (virtual time, exit code) of each termination it reports in ``exits``)."""
    loop = asyncio.get_running_loop()
    clock = VirtualClock(loop)
    store = Store(None, clock, admission=admit, uid_factory=counter_uids())
    client = LocalClient(store)
    await ensure_node(client, "n1", {"cpu": "8", "memory": str(32 * 2**30), "pods": "110"}, clock)
    agent = SimAgent(client, clock, [SimNode("n1", "10.0.0.1")],
                     config or SimAgentConfig(backoff_base=10, backoff_cap=40, events=False))
    task = loop.create_task(agent.run())
    seen: list[tuple[float, tuple]] = []

    async def pump():
        async for ev in client.watch("Pod", "default", resource_version=store.current_rv()):
            if ev.object["metadata"]["name"] != watch:
                continue
            s = ("<deleted>",) if ev.type == "DELETED" else summary(ev.object)
            term = ((((ev.object.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {})
                    .get("terminated"))
            if exits is not None and term and (not exits or exits[-1][1] != term["exitCode"]):
                exits.append((round(loop.time(), 6), term["exitCode"]))
            if not seen or seen[-1][1] != s:
                seen.append((round(loop.time(), 6), s))

    pumper = loop.create_task(pump())
    await asyncio.sleep(0)
    await scenario(client, loop)
    await asyncio.sleep(max(0.0, horizon - loop.time()))
    await agent.stop()
    pumper.cancel()
    task.cancel()
    await asyncio.gather(task, pumper, return_exceptions=True)
    return seen


def run(scenario, horizon, config=None, watch="p", exits=None):
    return run_virtual(simulate(scenario, horizon, config, watch, exits))


def starts(seen):
    """Virtual times at which the container was (re)started: it shows running."""
    return [t for t, s in seen if s[1] == "running"]


def test_on_failure_restarts_in_place_with_crash_loop_back_off_doubling_to_the_cap():
    async def scenario(c, loop):
        await c.create(pod("p", ["sh", "-c", "sleep 10s & wait; exit 1"]))

    seen = run(scenario, 400)
    # Run 10 s, fail; the first restart is immediate, then 10, 20, 40, 40 (cap) of back-off.
    assert starts(seen) == [0.0, 10.0, 30.0, 60.0, 110.0, 160.0, 210.0, 260.0, 310.0, 360.0]
    restart_counts = [s[3] for _, s in seen if s[1] == "running"]
    assert restart_counts == list(range(10))
    # Each failure shows Error first, then CrashLoopBackOff while the back-off lasts.
    assert (20.0, ("Running", "terminated", "Error", 1)) in seen
    assert (20.0, ("Running", "waiting", "CrashLoopBackOff", 1)) in seen
    assert seen[:2] == [(0.0, ("Pending", "", "", 0)), (0.0, ("Pending", "waiting", "ContainerCreating", 0))]
    assert all(s[0] == "Running" for _, s in seen[2:])  # OnFailure: never Failed while restarting


def test_never_fails_the_pod_and_always_restarts_even_a_clean_exit():
    async def never(c, loop):
        await c.create(pod("p", ["sh", "-c", "sleep 3; exit 2"], policy="Never"))

    assert run(never, 60) == [(0.0, ("Pending", "", "", 0)), (0.0, ("Pending", "waiting", "ContainerCreating", 0)),
                              (0.0, ("Running", "running", "", 0)), (3.0, ("Failed", "terminated", "Error", 0))]

    async def always(c, loop):
        await c.create(pod("p", ["sleep", "5"], policy="Always"))

    seen = run(always, 60)
    assert starts(seen)[:4] == [0.0, 5.0, 20.0, 45.0]  # exit 0 restarted too, with back-off
    assert (5.0, ("Running", "terminated", "Completed", 0)) in seen


def test_backoff_is_forgotten_after_a_long_run():
    async def scenario(c, loop):
        # Fails after 10 s twice, then runs 100 s (>= 2 x cap: back-off reset), fails again.
        await c.create(pod("p", annotations={"sim.phalanx.dev/fail-after": "10s", "sim.phalanx.dev/failures": "3",
                                             "sim.phalanx.dev/duration": "100s", "sim.phalanx.dev/exit-code": "0"}))

    cfg = SimAgentConfig(backoff_base=10, backoff_cap=40, backoff_reset=80, events=False)
    seen = run(scenario, 400, cfg)
    assert starts(seen) == [0.0, 10.0, 30.0, 60.0]
    # The fourth run is clean (failures: 3) and exits 0 under OnFailure: Succeeded.
    assert seen[-1] == (160.0, ("Succeeded", "terminated", "Completed", 3))


def test_init_containers_run_first_and_a_wait_for_host_ends_at_the_poll_after_it_is_ready():
    wait = {"name": "init-wait", "image": "alpine", "command": [
        "sh", "-c", "err=1;for i in $(seq 100); do if nslookup master-0; then err=0 && break; fi;"
        "echo waiting for master; sleep 2; done; exit $err"]}
    setup = {"name": "init-setup", "image": "alpine", "command": ["sh", "-c", "sleep 1"]}

    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "30"], init=[setup, wait]))
        await asyncio.sleep(4.5)
        await c.create(pod("master-0", ["sleep", "30"]))  # ready at 4.5

    seen = run(scenario, 20)
    phases = [(t, s[0], s[1], s[2]) for t, s in seen]
    assert phases[:2] == [(0.0, "Pending", "", ""), (0.0, "Pending", "waiting", "PodInitializing")]
    # init-setup 0..1, init-wait polls at 1, 3, 5 (master ready at 4.5): main starts at 5.
    assert (5.0, "Running", "running", "") in phases
    assert all(t >= 5.0 for t, ph, *_ in phases if ph == "Running")


def test_a_host_that_never_resolves_fails_the_init_container_after_its_tries():
    wait = {"name": "init-wait", "image": "alpine",
            "command": ["sh", "-c", "for i in $(seq 3); do if nslookup nobody; then exit 0; fi; sleep 2; done; exit 1"]}

    async def scenario(c, loop):
        await c.create(pod("p", init=[wait], policy="Never"))

    seen = run(scenario, 30)
    assert seen[-1] == (6.0, ("Failed", "waiting", "PodInitializing", 0))


def test_graceful_deletion_kills_with_sigterm_and_removes_the_pod_at_once():
    async def scenario(c, loop):
        await c.create(pod("p", ["sh", "-c", "trap exit TERM; sleep 30s & wait"]))
        await asyncio.sleep(7)
        await c.delete("Pod", "p", "default")

    seen = run(scenario, 60)
    assert seen[-3:] == [(7.0, ("Running", "running", "", 0)), (7.0, ("Failed", "terminated", "Error", 0)),
                         (7.0, ("<deleted>",))] or seen[-2:] == [(7.0, ("Failed", "terminated", "Error", 0)),
                                                                 (7.0, ("<deleted>",))]


def test_no_restart_mark_of_a_finished_job_is_obeyed():
    async def scenario(c, loop):
        await c.create(pod("p", ["sh", "-c", "sleep 10; exit 1"]))
        await asyncio.sleep(15)  # restarted once at 10 (immediate)
        await c.patch("Pod", "p", "default", {"metadata": {"annotations": {"phalanx.dev/no-restart": "true"}}})

    seen = run(scenario, 100)
    assert starts(seen) == [0.0, 10.0]
    assert seen[-1] == (20.0, ("Failed", "terminated", "Error", 1))


def test_active_deadline_fails_the_pod_exactly_on_time():
    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "100"], activeDeadlineSeconds=12))

    seen = run(scenario, 30)
    assert seen[-1][0] == 12.0 and seen[-1][1][0] == "Failed"


def test_startup_latency_shows_container_creating_then_running():
    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "5"], annotations={"sim.phalanx.dev/startup": "2s"}))

    seen = run(scenario, 30)
    assert seen[:3] == [(0.0, ("Pending", "", "", 0)), (0.0, ("Pending", "waiting", "ContainerCreating", 0)),
                        (2.0, ("Running", "running", "", 0))]
    assert seen[-1] == (7.0, ("Succeeded", "terminated", "Completed", 0))


def test_replica_index_annotation_overrides_the_template_and_a_bad_one_names_itself():
    async def scenario(c, loop):
        p = pod("p", ["sleep", "100"], annotations={"sim.phalanx.dev/duration": "50s",
                                                    "sim.phalanx.dev/replica-1": "fail-after=4s exit-code=3"},
                policy="Never")
        p["metadata"]["labels"] = {"training.kubeflow.org/replica-index": "1"}
        await c.create(p)
        q = pod("q", annotations={"sim.phalanx.dev/duration": "soon"})
        await c.create(q)

    assert run(scenario, 60)[-1] == (4.0, ("Failed", "terminated", "Error", 0))

    seen = run(scenario, 10, watch="q")
    assert seen[-1][1][0] == "Failed"

    async def reason(c, loop):
        await scenario(c, loop)
        await asyncio.sleep(1)
        q = await c.get("Pod", "q", "default")
        assert q["status"]["reason"] == "InvalidPodSpec"
        assert "sim.phalanx.dev/duration" in q["status"]["message"]

    run(reason, 5)



def test_graceful_deletion_stops_the_container_after_the_stop_time_then_removes_the_pod():
    exits: list = []

    async def scenario(c, loop):
        await c.create(pod("p", ["sh", "-c", "trap exit TERM; sleep 30s & wait"]))
        await asyncio.sleep(7)
        await c.delete("Pod", "p", "default")  # grace 30 (the default)
        await asyncio.sleep(1)
        await c.delete("Pod", "p", "default")  # a second DELETE changes nothing
        await asyncio.sleep(0.5)
        got = await c.get("Pod", "p", "default")
        assert got["metadata"]["deletionTimestamp"] and got["status"]["phase"] == "Running"

    cfg = SimAgentConfig(backoff_base=10, backoff_cap=40, events=False, stop_time=2)
    seen = run(scenario, 60, cfg, exits=exits)
    # SIGTERM at 7, the container exits 2 s later with 143, the pod is removed at once then
    assert seen[-2:] == [(9.0, ("Failed", "terminated", "Error", 0)), (9.0, ("<deleted>",))]
    assert [s for t, s in seen if 7.0 <= t < 9.0] in ([], [("Running", "running", "", 0)])
    assert exits == [(9.0, 143)]


def test_a_stop_time_longer_than_the_grace_period_ends_in_sigkill_at_the_grace():
    exits: list = []

    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "100"], terminationGracePeriodSeconds=3))
        await asyncio.sleep(7)
        await c.delete("Pod", "p", "default")

    seen = run(scenario, 60, SimAgentConfig(events=False, stop_time=5), exits=exits)
    assert seen[-1] == (10.0, ("<deleted>",))
    assert exits == [(10.0, 137)]


def test_a_container_that_ends_before_its_stop_time_exits_with_its_own_code():
    exits: list = []

    async def scenario(c, loop):
        await c.create(pod("p", ["sh", "-c", "sleep 8; exit 3"]))
        await asyncio.sleep(7)
        await c.delete("Pod", "p", "default")

    seen = run(scenario, 60, SimAgentConfig(events=False, stop_time=5), exits=exits)
    assert seen[-1] == (8.0, ("<deleted>",))
    assert exits == [(8.0, 3)]


def test_a_kill_records_one_killing_event_per_container():
    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "100"]))
        await asyncio.sleep(7)
        await c.delete("Pod", "p", "default")
        await asyncio.sleep(1)
        await c.delete("Pod", "p", "default")
        await asyncio.sleep(5)
        events = [e for e in (await c.list("Event", "default")).items if e["reason"] == "Killing"]
        assert [(e["message"], e.get("count", 1)) for e in events] == [("Stopping container main", 1)]

    run(scenario, 30, SimAgentConfig(events=True, stop_time=3))


def test_its_own_writes_coming_back_do_not_start_another_round(monkeypatch):
    """A pod event no newer than the pod the agent holds (the echo of its own status
    write) is not news: a pod run to its end is decided on once per change it went
    through, not once more per write it made."""
    from phalanx.sim import agent as sim_agent

    decisions: list[str] = []
    decide = sim_agent.podstate.decide

    def counting(pod, *a, **k):
        decisions.append(pod["metadata"]["resourceVersion"])
        return decide(pod, *a, **k)

    monkeypatch.setattr(sim_agent.podstate, "decide", counting)

    async def scenario(c, loop):
        await c.create(pod("p", ["sleep", "5"]))

    seen = run(scenario, 30)
    assert seen == [(0.0, ("Pending", "", "", 0)), (0.0, ("Pending", "waiting", "ContainerCreating", 0)),
                    (0.0, ("Running", "running", "", 0)), (5.0, ("Succeeded", "terminated", "Completed", 0))]
    # Bound (rv 2): decide, write ContainerCreating (3) and start; decide, write Running (4);
    # decide (no change). At 5 s: decide, write Succeeded (5); decide (no change). The
    # echoes of writes 3, 4 and 5 start no round of their own.
    assert len(decisions) == 5, decisions
