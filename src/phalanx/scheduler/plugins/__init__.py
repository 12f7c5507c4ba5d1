"""Scheduler plugins by name: adding a policy means adding a module here."""
from __future__ import annotations

from ..framework import Plugin
from .binpack import BinpackPlugin
from .gang import GangPlugin
from .nodeorder import NodeOrderPlugin
from .overcommit import OvercommitPlugin
from .predicates import PredicatesPlugin
from .priority import PriorityPlugin
from .proportion import ProportionPlugin

PLUGINS: dict[str, type[Plugin]] = {
    p.name: p for p in (PriorityPlugin, GangPlugin, OvercommitPlugin, PredicatesPlugin,
                        ProportionPlugin, NodeOrderPlugin, BinpackPlugin)
}
