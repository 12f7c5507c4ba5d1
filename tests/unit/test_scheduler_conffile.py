"""volcano-scheduler.conf read into a SchedulerConfig and rendered back: Volcano's files, Phalanx's default,
the arguments Phalanx maps, and a message naming the field for everything it refuses."""
from __future__ import annotations

import pytest
import yaml

from phalanx.cluster import EmbeddedCluster
from phalanx.config import ClusterConfig, NodeConfig
from phalanx.deploy.manifests import InstallOptions, install_objects
from phalanx.scheduler.conffile import (
    SchedulerConfError,
    load_scheduler_conf,
    parse_scheduler_conf,
    render_scheduler_conf,
)
from phalanx.scheduler.config import DEFAULT_TIERS, VOLCANO_DEFAULT_ACTIONS, SchedulerConfig

# Volcano's helm chart default (installer/helm/chart/volcano/config/volcano-scheduler.conf) before capacity
# replaced proportion, less drf (not implemented: see phalanx.scheduler.config).
VOLCANO_DEFAULT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

# The chart's default today, verbatim.
VOLCANO_HELM_DEFAULT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
"""


def problems(text: str) -> list[str]:
    with pytest.raises(SchedulerConfError) as e:
        parse_scheduler_conf(text, "s.conf")
    assert str(e.value) == "\n".join(f"s.conf: {p}" for p in e.value.problems)
    return e.value.problems


def with_plugin(plugin: str) -> str:
    """A valid file whose second tier holds ``plugin`` (YAML of one plugin option)."""
    return 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n' + "".join(
        f"  {line}\n" for line in plugin.strip().splitlines())


def test_volcanos_default_parses_to_volcanos_actions_and_tiers():
    c = parse_scheduler_conf(VOLCANO_DEFAULT)
    assert c.actions == VOLCANO_DEFAULT_ACTIONS
    assert c.tiers == DEFAULT_TIERS
    # An argument not given keeps Phalanx's default.
    assert c.binpack_weight == SchedulerConfig().binpack_weight == 10


def test_volcanos_helm_default_today_is_refused_for_what_phalanx_lacks():
    assert problems(VOLCANO_HELM_DEFAULT) == [
        "tiers[0].plugins[1].enablePreemptable: false is not supported: Phalanx's gang plugin cannot turn this "
        "off; remove the field",
        "tiers[1].plugins[1].name: Volcano's 'drf' plugin is not implemented by Phalanx; remove it (Phalanx "
        "orders a queue's jobs by priority, then creation time)",
        "tiers[1].plugins[3].name: Volcano's 'capacity' plugin is not implemented by Phalanx; remove it (queues "
        "share the cluster by proportion: weight, capability and reclaimable)"]


def test_phalanx_default_renders_and_parses_back_equal():
    text = render_scheduler_conf(SchedulerConfig())
    assert text.startswith('actions: "enqueue, allocate, preempt, reclaim, backfill"\ntiers:\n')
    assert parse_scheduler_conf(text) == SchedulerConfig()
    doc = yaml.safe_load(text)
    binpack = doc["tiers"][1]["plugins"][4]
    assert binpack == {"name": "binpack", "arguments": {"binpack.weight": 10, "binpack.cpu": 1, "binpack.memory": 1}}
    assert isinstance(binpack["arguments"]["binpack.weight"], int)  # Volcano reads weights as integers


def test_a_config_of_ones_own_renders_and_parses_back_equal():
    c = SchedulerConfig(actions=("enqueue", "allocate", "backfill"), tiers=(("gang",), ("predicates", "binpack")),
                        binpack_weight=3, binpack_resources={"nvidia.com/gpu": 5, "example.com/foo": 1})
    text = render_scheduler_conf(c)
    assert "binpack.resources: nvidia.com/gpu, example.com/foo" in text
    assert parse_scheduler_conf(text) == c


def test_arguments_mapped():
    c = parse_scheduler_conf(with_plugin("""
- name: overcommit
  arguments: {overcommit-factor: 2}
- name: predicates
  arguments: {predicate.GPUSharingEnable: false}
- name: nodeorder
  arguments:
    leastrequested.weight: 0
    mostrequested.weight: 3
    balancedresource.weight: 4
    nodeaffinity.weight: 5
    podaffinity.weight: 0
    tainttoleration.weight: 0
- name: binpack
  arguments:
    binpack.weight: 7
    binpack.cpu: 2
    binpack.memory: 3
    binpack.resources: nvidia.com/gpu, example.com/foo
    binpack.resources.nvidia.com/gpu: 4
"""))
    assert c.tiers == (("gang",), ("overcommit", "predicates", "nodeorder", "binpack"))
    assert (c.overcommit_factor, c.leastrequested_weight, c.mostrequested_weight, c.balancedresource_weight,
            c.nodeaffinity_weight) == (2, 0, 3, 4, 5)
    assert (c.binpack_weight, c.binpack_cpu, c.binpack_memory) == (7, 2, 3)
    assert c.binpack_resources == {"nvidia.com/gpu": 4, "example.com/foo": 1}  # listed without a weight: 1
    assert parse_scheduler_conf(with_plugin("- {name: overcommit, arguments: {overcommit-factor: 1.5}}")
                                ).overcommit_factor == 1.5


def test_the_base_keeps_what_the_file_has_no_keys_for():
    base = SchedulerConfig(scheduler_name="mine", default_queue="q", extra_scheduler_names=("x",), binpack_weight=1)
    c = parse_scheduler_conf(VOLCANO_DEFAULT, base=base)
    assert (c.scheduler_name, c.default_queue, c.extra_scheduler_names, c.binpack_weight) == ("mine", "q", ("x",), 1)
    assert c.actions == VOLCANO_DEFAULT_ACTIONS


@pytest.mark.parametrize("text, expected", [
    ('actions: "enqueue, allocate, bogus"\ntiers: [{plugins: [{name: gang}]}]',
     ["actions: unknown action 'bogus'; known: enqueue, allocate, preempt, reclaim, backfill"]),
    ('actions: "enqueue, shuffle"\ntiers: [{plugins: [{name: gang}]}]',
     ["actions: Volcano's 'shuffle' action is not implemented by Phalanx (Phalanx evicts only to preempt or "
      "reclaim)"]),
    ('actions: "allocate, allocate"\ntiers: [{plugins: [{name: gang}]}]', ["actions: 'allocate' is listed twice"]),
    ('actions: [enqueue, allocate]\ntiers: [{plugins: [{name: gang}]}]',
     ['actions: required: one string of comma-separated action names, e.g. "enqueue, allocate, preempt, '
      'reclaim, backfill"']),
    ("tiers: [{plugins: [{name: gang}]}]",
     ['actions: required: one string of comma-separated action names, e.g. "enqueue, allocate, preempt, '
      'reclaim, backfill"']),
    ('actions: "allocate"', ["tiers: required: a list of tiers, each {plugins: [{name: ...}, ...]}"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}, {name: gangs}]}]',
     ["tiers[0].plugins[1].name: unknown plugin 'gangs'; known: priority, gang, conformance, overcommit, "
      "predicates, proportion, nodeorder, binpack"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}]}, {plugins: [{name: gang}]}]',
     ["tiers[1].plugins[0].name: plugin 'gang' is already in tiers[0].plugins[0]"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: sla}]}]',
     ["tiers[0].plugins[0].name: Volcano's 'sla' plugin is not implemented by Phalanx; remove it"]),
    ('actions: "allocate"\ntiers: [{plugins: [gang]}]',
     ["tiers[0].plugins[0]: must be a mapping with a name, e.g. {name: gang}"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}], weight: 1}]',
     ["tiers[0].weight: unknown field; known: plugins"]),
    ('actions: "allocate"\ntiers: [[gang]]', ["tiers[0]: must be a mapping with plugins: a list of {name: ...}"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: proportion, enableHierarchy: true}]}]',
     ["tiers[0].plugins[0].enableHierarchy: true is not supported: Phalanx's proportion plugin cannot turn this "
      "off; remove the field"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang, enableJobReady: "no"}]}]',
     ["tiers[0].plugins[0].enableJobReady: must be true or false"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang, enableJobReady: true, enablePreemptable: true}]}]', []),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}]}]\nconfigurations: [{name: preempt, arguments: {a: 1}}]',
     ["configurations[0].arguments: Phalanx's preempt action takes no arguments"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}]}]\nconfigurations: [{name: nope}]',
     ["configurations[0].name: unknown action 'nope'; known: enqueue, allocate, preempt, reclaim, backfill"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}]}]\nmetrics: {type: prometheus}',
     ["metrics: Phalanx reads no metrics source (Volcano's usage plugin is not implemented)"]),
    ('actions: "allocate"\ntiers: [{plugins: [{name: gang}]}]\nplugins: []',
     ["plugins: unknown field; known: actions, tiers, configurations, metrics"]),
    ("", ['empty: it needs actions, e.g. actions: "enqueue, allocate, backfill", and tiers']),
    ("- a", ["must be a mapping with actions and tiers"]),
])
def test_refused_naming_the_field(text, expected):
    if expected:
        assert problems(text) == expected
    else:
        parse_scheduler_conf(text)


@pytest.mark.parametrize("plugin, expected", [
    ("- {name: binpack, arguments: {binpack.weight: '10'}}",
     "arguments[binpack.weight]: plugin binpack: argument binpack.weight must be an integer, got '10'"),
    ("- {name: binpack, arguments: {binpack.cpu: 1.5}}",
     "arguments[binpack.cpu]: plugin binpack: argument binpack.cpu must be an integer, got 1.5"),
    ("- {name: nodeorder, arguments: {nodeaffinity.weight: true}}",
     "arguments[nodeaffinity.weight]: plugin nodeorder: argument nodeaffinity.weight must be an integer, got True"),
    ("- {name: overcommit, arguments: {overcommit-factor: high}}",
     "arguments[overcommit-factor]: plugin overcommit: argument overcommit-factor must be a number, got 'high'"),
    ("- {name: overcommit, arguments: {overcommit-factor.cpu: 2}}",
     "arguments[overcommit-factor.cpu]: plugin overcommit: per-resource factors are not implemented by Phalanx; "
     "use overcommit-factor"),
    ("- {name: nodeorder, arguments: {podaffinity.weight: 2}}",
     "arguments[podaffinity.weight]: plugin nodeorder: argument podaffinity.weight is not implemented by "
     "Phalanx; only 0 (off) is accepted"),
    ("- {name: predicates, arguments: {predicate.CacheEnable: true}}",
     "arguments[predicate.CacheEnable]: plugin predicates: argument predicate.CacheEnable is not implemented by "
     "Phalanx; only false (off) is accepted"),
    ("- {name: binpack, arguments: {binpack.wieght: 10}}",
     "arguments[binpack.wieght]: plugin binpack: unknown argument 'binpack.wieght'; known: binpack.weight, "
     "binpack.cpu, binpack.memory, binpack.resources, binpack.resources.<name>"),
    ("- {name: proportion, arguments: {x: 1}}",
     "arguments[x]: plugin proportion: unknown argument 'x'; Phalanx's proportion takes none"),
    ("- {name: binpack, arguments: {binpack.resources.nvidia.com/gpu: 2}}",
     "arguments[binpack.resources.nvidia.com/gpu]: plugin binpack: resource 'nvidia.com/gpu' is not listed in "
     "binpack.resources"),
    ("- {name: binpack, arguments: {binpack.resources: cpu}}",
     "arguments[binpack.resources]: plugin binpack: cpu is weighed by binpack.cpu, not binpack.resources"),
    ("- {name: binpack, arguments: {binpack.resources: [a]}}",
     "arguments[binpack.resources]: plugin binpack: argument binpack.resources must be a string of "
     "comma-separated resource names, got ['a']"),
    ("- {name: binpack, arguments: [binpack.weight]}", "arguments: must be a mapping of argument names to values"),
])
def test_an_argument_refused_names_the_plugin_and_the_argument(plugin, expected):
    assert problems(with_plugin(plugin)) == [f"tiers[1].plugins[0].{expected}"]


def test_every_problem_at_once_and_yaml_errors():
    assert len(problems('actions: "bogus, shuffle"\ntiers: [{plugins: [{name: drf}, {name: x}]}]')) == 4
    (p,) = problems("actions: [\n")
    assert p.startswith("cannot parse YAML: ")


def test_load_names_the_file(tmp_path):
    f = tmp_path / "volcano-scheduler.conf"
    f.write_text(VOLCANO_DEFAULT)
    assert load_scheduler_conf(f).actions == VOLCANO_DEFAULT_ACTIONS
    with pytest.raises(SchedulerConfError) as e:
        load_scheduler_conf(tmp_path / "missing.conf")
    assert str(e.value) == f"{tmp_path / 'missing.conf'}: cannot read: No such file or directory"


def test_install_ships_the_configuration_in_volcanos_configmap():
    objs = install_objects(InstallOptions(webhook=None))
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "volcano-scheduler-configmap"
    assert parse_scheduler_conf(cm["data"]["volcano-scheduler.conf"]) == SchedulerConfig()
    own = install_objects(InstallOptions(webhook=None, scheduler_conf=VOLCANO_DEFAULT))
    assert [o for o in own if o["kind"] == "ConfigMap"][0]["data"] == {"volcano-scheduler.conf": VOLCANO_DEFAULT}
    with pytest.raises(ValueError, match=r"^--scheduler-conf: volcano-scheduler.conf: tiers\[0\]\.plugins\[1\]\.enablePreemptable"):
        install_objects(InstallOptions(webhook=None, scheduler_conf=VOLCANO_HELM_DEFAULT))
    assert not [o for o in install_objects(InstallOptions(webhook=None, scheduler=False)) if o["kind"] == "ConfigMap"]


def test_the_embedded_cluster_runs_the_configured_scheduler(tmp_path):
    conf = parse_scheduler_conf(VOLCANO_DEFAULT)
    cluster = EmbeddedCluster(tmp_path, ClusterConfig(nodes=[NodeConfig("n1", 4, 2**30)], scheduler=conf),
                              persist=False)
    try:
        assert cluster.scheduler is not None
        assert cluster.scheduler.config.actions == VOLCANO_DEFAULT_ACTIONS
        assert cluster.scheduler.config.scheduler_names == frozenset(ClusterConfig().scheduler_names)
    finally:
        cluster.store.close()
