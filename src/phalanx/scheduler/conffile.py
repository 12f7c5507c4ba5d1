"""Volcano's scheduler configuration file (``volcano-scheduler.conf``) read into a SchedulerConfig, and back.

The format is Volcano's ``pkg/scheduler/conf``: ``actions`` (one comma-separated string), ``tiers`` (lists of
plugin options: ``name``, ``enable*`` switches, ``arguments``), ``configurations`` (per-action arguments) and
``metrics``. Everything Phalanx cannot honour is refused, naming the field, instead of being ignored:
a Volcano action or plugin Phalanx does not implement, a switch turned away from its default, an argument
Phalanx does not read (unless it holds the value that means "off"), an argument of the wrong type. An
argument not given keeps Phalanx's default (``phalanx.scheduler.config``: binpack.weight is 10, Volcano's 1).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

import yaml

from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.framework import check_config

# Volcano's names for the file, its ConfigMap and its mount (installer/helm/chart/volcano).
CONF_FILE_NAME = "volcano-scheduler.conf"
CONFIGMAP_NAME = "volcano-scheduler-configmap"
CONF_MOUNT_PATH = "/volcano.scheduler"

# Volcano's actions and plugins Phalanx does not implement, with what Phalanx does instead.
UNIMPLEMENTED_ACTIONS: dict[str, str] = {
    "shuffle": "Phalanx evicts only to preempt or reclaim",
    "reserve": "Phalanx reserves no nodes",
    "elect": "Phalanx reserves no nodes",
}
UNIMPLEMENTED_PLUGINS: dict[str, str] = {
    "drf": "Phalanx orders a queue's jobs by priority, then creation time",
    "capacity": "queues share the cluster by proportion: weight, capability and reclaimable",
    "sla": "", "tdm": "", "numaaware": "", "task-topology": "", "resourcequota": "", "rescheduling": "",
    "usage": "", "cdp": "", "deviceshare": "", "extender": "", "nodegroup": "", "pdb": "", "reservation": "",
    "network-topology-aware": "", "resource-strategy-fit": "", "capacity-card": "",
}

# Plugin option switches (conf.PluginOption) and the value Volcano defaults them to
# (plugins.ApplyPluginConfDefaults: true, except hierarchy). Phalanx accepts the default only.
SWITCHES: dict[str, bool] = {k: True for k in (
    "enableJobOrder", "enableNamespaceOrder", "enableJobReady", "enableJobPipelined", "enableTaskOrder",
    "enablePreemptable", "enableReclaimable", "enablePreemptive", "enableQueueOrder", "enabledClusterOrder",
    "EnabledClusterOrder", "enablePredicate", "enableBestNode", "enableNodeOrder", "enableTargetJob",
    "enableReservedNodes", "enableJobEnqueued", "enabledVictim", "enableJobStarving", "enabledOverused",
    "enabledAllocatable", "enabledHyperNodeOrder", "enabledSubJobReady", "enabledSubJobPipelined",
    "enabledSubJobOrder", "enabledHyperNodeGradient")}
SWITCHES["enableHierarchy"] = False


@dataclasses.dataclass(frozen=True)
class Arg:
    """A plugin argument Phalanx reads: the SchedulerConfig field and the YAML type Volcano reads it as."""
    field: str
    kind: str  # "int" (Volcano's Arguments.GetInt) | "number" (an int or a float, GetFloat64)


ARGS: dict[str, dict[str, Arg]] = {
    "binpack": {"binpack.weight": Arg("binpack_weight", "int"), "binpack.cpu": Arg("binpack_cpu", "int"),
                "binpack.memory": Arg("binpack_memory", "int")},
    "nodeorder": {"leastrequested.weight": Arg("leastrequested_weight", "int"),
                  "mostrequested.weight": Arg("mostrequested_weight", "int"),
                  "balancedresource.weight": Arg("balancedresource_weight", "int"),
                  "nodeaffinity.weight": Arg("nodeaffinity_weight", "int")},
    "overcommit": {"overcommit-factor": Arg("overcommit_factor", "number")},
}
# Volcano arguments Phalanx does not read, accepted only with the value that turns them off.
OFF_ARGS: dict[str, dict[str, object]] = {
    "nodeorder": {"podaffinity.weight": 0, "tainttoleration.weight": 0, "imagelocality.weight": 0,
                  "podtopologyspread.weight": 0, "volumebinding.weight": 0},
    "predicates": {"predicate.GPUSharingEnable": False, "predicate.GPUNumberEnable": False,
                   "predicate.CacheEnable": False, "predicate.ProportionalEnable": False},
}
BINPACK_RESOURCES = "binpack.resources"


class SchedulerConfError(ValueError):
    """A configuration file Phalanx cannot run with: every problem, each naming its field."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(f"{source}: {p}" for p in problems))


def load_scheduler_conf(path: str | Path, base: SchedulerConfig | None = None) -> SchedulerConfig:
    """Read and parse the file at ``path`` (SchedulerConfError names the file, also when it cannot be read)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SchedulerConfError(str(path), [f"cannot read: {reason}"]) from None
    return parse_scheduler_conf(text, str(path), base)


def parse_scheduler_conf(text: str, source: str = CONF_FILE_NAME,
                         base: SchedulerConfig | None = None) -> SchedulerConfig:
    """The SchedulerConfig the file describes, over ``base`` (default: Phalanx's defaults): actions, tiers
    and plugin arguments come from the file; everything else (scheduler name, queue, ...) from ``base``."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SchedulerConfError(source, [f"cannot parse YAML: {' '.join(str(e).split())}"]) from None
    problems: list[str] = []
    values = _parse(data, problems)
    if problems:
        raise SchedulerConfError(source, problems)
    return dataclasses.replace(base or SchedulerConfig(), **values)


def _parse(data: object, problems: list[str]) -> dict[str, Any]:
    if data is None:
        problems.append('empty: it needs actions, e.g. actions: "enqueue, allocate, backfill", and tiers')
        return {}
    if not isinstance(data, dict):
        problems.append("must be a mapping with actions and tiers")
        return {}
    for key in data:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            problems.append(f"{key}: unknown field; known: actions, tiers, configurations, metrics")
    values: dict[str, Any] = {"actions": _actions(data.get("actions"), problems)}
    values["tiers"] = _tiers(data.get("tiers"), values, problems)
    _configurations(data.get("configurations"), problems)
    metrics = data.get("metrics")
    if metrics:
        problems.append("metrics: Phalanx reads no metrics source (Volcano's usage plugin is not implemented)")
    return values


def _actions(raw: object, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, str) or not raw.strip():
        problems.append('actions: required: one string of comma-separated action names, e.g. '
                        '"enqueue, allocate, preempt, reclaim, backfill"')
        return ()
    names = tuple(a.strip() for a in raw.split(","))
    for i, a in enumerate(names):
        if a in names[:i]:
            problems.append(f"actions: {a!r} is listed twice")
        elif a in UNIMPLEMENTED_ACTIONS:
            problems.append(f"actions: Volcano's {a!r} action is not implemented by Phalanx "
                            f"({UNIMPLEMENTED_ACTIONS[a]})")
        else:
            _check(lambda: check_config(SchedulerConfig(actions=(a,), tiers=())), "", problems)
    return names


def _check(run: Callable[[], None], field: str, problems: list[str]) -> None:
    """framework.check_config's message for one name; ``field`` replaces the field it names."""
    try:
        run()
    except ValueError as e:
        text = str(e)
        problems.append(f"{field}: {text.split(': ', 1)[1]}" if field else text)


def _tiers(raw: object, values: dict[str, Any], problems: list[str]) -> tuple[tuple[str, ...], ...]:
    if not isinstance(raw, list) or not raw:
        problems.append("tiers: required: a list of tiers, each {plugins: [{name: ...}, ...]}")
        return ()
    tiers: list[tuple[str, ...]] = []
    seen: dict[str, str] = {}
    for t, tier in enumerate(raw):
        where = f"tiers[{t}]"
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            problems.append(f"{where}: must be a mapping with plugins: a list of {{name: ...}}")
            continue
        for key in tier:
            if key != "plugins":
                problems.append(f"{where}.{key}: unknown field; known: plugins")
        names: list[str] = []
        for j, opt in enumerate(tier["plugins"]):
            name = _plugin(opt, f"{where}.plugins[{j}]", t, values, problems)
            if name is None:
                continue
            if name in seen:
                problems.append(f"{where}.plugins[{j}].name: plugin {name!r} is already in {seen[name]}")
                continue
            seen[name] = f"{where}.plugins[{j}]"
            names.append(name)
        tiers.append(tuple(names))
    return tuple(tiers)


def _plugin(opt: object, where: str, t: int, values: dict[str, Any], problems: list[str]) -> str | None:
    if not isinstance(opt, dict) or not isinstance(opt.get("name"), str) or not opt["name"]:
        problems.append(f"{where}: must be a mapping with a name, e.g. {{name: gang}}")
        return None
    name: str = opt["name"]
    if name in UNIMPLEMENTED_PLUGINS:
        hint = UNIMPLEMENTED_PLUGINS[name]
        problems.append(f"{where}.name: Volcano's {name!r} plugin is not implemented by Phalanx; remove it"
                        + (f" ({hint})" if hint else ""))
        return None
    before = len(problems)
    _check(lambda: check_config(SchedulerConfig(actions=(), tiers=((),) * t + ((name,),))), f"{where}.name",
           problems)
    if len(problems) > before:
        return None
    for key, value in opt.items():
        if key in ("name", "arguments"):
            continue
        if key not in SWITCHES:
            problems.append(f"{where}.{key}: unknown field; known: name, arguments, {', '.join(sorted(SWITCHES))}")
        elif not isinstance(value, bool):
            problems.append(f"{where}.{key}: must be true or false")
        elif value != SWITCHES[key]:
            problems.append(f"{where}.{key}: {str(value).lower()} is not supported: Phalanx's {name} plugin "
                            f"cannot turn this off; remove the field")
    _arguments(name, opt.get("arguments"), f"{where}.arguments", values, problems)
    return name


def _arguments(plugin: str, raw: object, where: str, values: dict[str, Any], problems: list[str]) -> None:
    if raw is None:
        return
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping of argument names to values")
        return
    known, off = ARGS.get(plugin, {}), OFF_ARGS.get(plugin, {})
    resources: dict[str, float] = {}
    if plugin == "binpack" and BINPACK_RESOURCES in raw:
        resources = _binpack_resources(raw[BINPACK_RESOURCES], f"{where}[{BINPACK_RESOURCES}]", problems)
        values["binpack_resources"] = resources
    for key, value in raw.items():
        field = f"{where}[{key}]"
        if key in known:
            arg = known[key]
            if arg.kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                problems.append(f"{field}: plugin {plugin}: argument {key} must be an integer, got {value!r}")
            elif arg.kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append(f"{field}: plugin {plugin}: argument {key} must be a number, got {value!r}")
            else:
                values[arg.field] = float(value)
        elif key in off:
            if type(value) is not type(off[key]) or value != off[key]:
                problems.append(f"{field}: plugin {plugin}: argument {key} is not implemented by Phalanx; "
                                f"only {str(off[key]).lower()} (off) is accepted")
        elif plugin == "binpack" and key == BINPACK_RESOURCES:
            continue
        elif plugin == "binpack" and key.startswith(BINPACK_RESOURCES + "."):
            res = key[len(BINPACK_RESOURCES) + 1:]
            if res not in resources:
                problems.append(f"{field}: plugin binpack: resource {res!r} is not listed in {BINPACK_RESOURCES}")
            elif isinstance(value, bool) or not isinstance(value, int):
                problems.append(f"{field}: plugin binpack: argument {key} must be an integer, got {value!r}")
            else:
                resources[res] = float(value)
        elif plugin == "overcommit" and key.startswith("overcommit-factor."):
            problems.append(f"{field}: plugin overcommit: per-resource factors are not implemented by Phalanx; "
                            "use overcommit-factor")
        else:
            names = [*known, *off, *([BINPACK_RESOURCES, BINPACK_RESOURCES + ".<name>"] if plugin == "binpack"
                                     else [])]
            problems.append(f"{field}: plugin {plugin}: unknown argument {key!r}"
                            + (f"; known: {', '.join(names)}" if names else f"; Phalanx's {plugin} takes none"))


def _binpack_resources(raw: object, field: str, problems: list[str]) -> dict[str, float]:
    """Volcano's ``binpack.resources: nvidia.com/gpu, example.com/foo``: each weighs 1 unless given."""
    if not isinstance(raw, str):
        problems.append(f"{field}: plugin binpack: argument {BINPACK_RESOURCES} must be a string of "
                        f"comma-separated resource names, got {raw!r}")
        return {}
    out: dict[str, float] = {}
    for res in (r.strip() for r in raw.split(",")):
        if res in ("cpu", "memory"):
            problems.append(f"{field}: plugin binpack: {res} is weighed by binpack.{res}, not {BINPACK_RESOURCES}")
        elif res:
            out[res] = 1.0
    return out


def _configurations(raw: object, problems: list[str]) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        problems.append("configurations: must be a list of {name: <action>, arguments: {...}}")
        return
    for i, c in enumerate(raw):
        where = f"configurations[{i}]"
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            problems.append(f"{where}: must be a mapping with the name of an action")
            continue
        for key in c:
            if key not in ("name", "arguments"):
                problems.append(f"{where}.{key}: unknown field; known: name, arguments")
        name = c["name"]
        _check(lambda: check_config(SchedulerConfig(actions=(name,), tiers=())), f"{where}.name", problems)
        if c.get("arguments"):
            problems.append(f"{where}.arguments: Phalanx's {name} action takes no arguments")


def render_scheduler_conf(config: SchedulerConfig) -> str:
    """``config`` as a volcano-scheduler.conf: its actions, tiers and the arguments of the plugins in them."""
    tiers = [{"plugins": [_render_plugin(name, config) for name in tier]} for tier in config.tiers]
    # The actions quoted, as Volcano's own files write them.
    return (f'actions: "{", ".join(config.actions)}"\n'
            + yaml.safe_dump({"tiers": tiers}, sort_keys=False, width=120))


def _render_plugin(name: str, config: SchedulerConfig) -> dict[str, Any]:
    args: dict[str, Any] = {key: _number(getattr(config, arg.field)) for key, arg in ARGS.get(name, {}).items()}
    if name == "binpack" and config.binpack_resources:
        args[BINPACK_RESOURCES] = ", ".join(config.binpack_resources)
        for res, w in config.binpack_resources.items():
            args[f"{BINPACK_RESOURCES}.{res}"] = _number(w)
    return {"name": name, "arguments": args} if args else {"name": name}


def _number(v: float) -> int | float:
    """Volcano reads weights as integers: a whole number is written as one."""
    return int(v) if float(v).is_integer() else v


__all__ = ["CONFIGMAP_NAME", "CONF_FILE_NAME", "CONF_MOUNT_PATH", "SchedulerConfError", "load_scheduler_conf",
           "parse_scheduler_conf", "render_scheduler_conf"]
