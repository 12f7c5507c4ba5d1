"""The object layer: helpers over JSON-shaped Kubernetes objects that every other layer uses.

Field access, names and DNS rules, quantities, selectors, API errors, watch events, clocks. Imports nothing of Phalanx.
"""
