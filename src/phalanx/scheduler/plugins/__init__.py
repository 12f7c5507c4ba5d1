"""Scheduler plugins by name: adding a policy means adding a module here."""
from __future__ import annotations

from phalanx.scheduler.plugins.binpack import BinpackPlugin
from phalanx.scheduler.plugins.conformance import ConformancePlugin
from phalanx.scheduler.plugins.gang import GangPlugin
from phalanx.scheduler.plugins.nodeorder import NodeOrderPlugin
from phalanx.scheduler.plugins.overcommit import OvercommitPlugin
from phalanx.scheduler.plugins.predicates import PredicatesPlugin
from phalanx.scheduler.plugins.priority import PriorityPlugin
from phalanx.scheduler.plugins.proportion import ProportionPlugin
from phalanx.scheduler.session import Plugin

PLUGINS: dict[str, type[Plugin]] = {
    p.name: p for p in (PriorityPlugin, GangPlugin, ConformancePlugin, OvercommitPlugin, PredicatesPlugin,
                        ProportionPlugin, NodeOrderPlugin, BinpackPlugin)
}
