"""Typed resources, defaulting and validation.

Objects travel between components as plain JSON-shaped dicts with Kubernetes
field names (``apiVersion/kind/metadata/spec/status``). The pydantic models in
this package are used at admission: to parse, default and validate user input,
and to produce the dict that is stored.
"""
