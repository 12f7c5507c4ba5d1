"""The local node agent: pods as host processes, their logs, limits and network.

Kept import-free: ``python -m phalanx.node.initwait`` runs inside a 20Mi init
container and must stay small.
"""
