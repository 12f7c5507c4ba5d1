"""Phalanx: gang-scheduled distributed training jobs, Kubeflow v1 + Volcano semantics."""

__version__ = "0.1.0"
