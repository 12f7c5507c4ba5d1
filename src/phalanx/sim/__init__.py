"""Simulation mode (`phalanx simulate`): the real control plane on a virtual clock.

- ``loop``: ``VirtualEventLoop`` (time jumps to the next timer) and ``VirtualClock``;
- ``agent``: ``SimAgent``, the kubelet of every simulated node, on ``podstate.decide``;
- ``behaviour`` / ``script``: what a simulated container does (annotations, its sh script);
- ``workload``: the workload file (pydantic) and the deterministic job generator;
- ``metrics``: per-job timings, allocation and queue lengths over time;
- ``runner``: ``Simulation`` wires store, job controller, scheduler, GC and agent;
- ``report``: summary table, CSV/JSON rows, timeline, SVG/PNG picture.
"""
