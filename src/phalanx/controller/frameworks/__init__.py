"""Framework plugins, one per job kind.

Adding a kind means adding a module with a ``Framework`` subclass and one line
in ``FRAMEWORKS``; the job reconciler does not change.
"""
from __future__ import annotations

from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState
from phalanx.controller.frameworks.jax import JAXFramework
from phalanx.controller.frameworks.mpi import MPIFramework
from phalanx.controller.frameworks.paddle import PaddleFramework
from phalanx.controller.frameworks.pytorch import PyTorchFramework
from phalanx.controller.frameworks.tensorflow import TensorFlowFramework
from phalanx.controller.frameworks.xgboost import XGBoostFramework

FRAMEWORKS: dict[str, Framework] = {
    "PyTorchJob": PyTorchFramework(),
    "TFJob": TensorFlowFramework(),
    "XGBoostJob": XGBoostFramework(),
    "PaddleJob": PaddleFramework(),
    "JAXJob": JAXFramework(),
    "MPIJob": MPIFramework(),
}


def get_framework(kind: str) -> Framework:
    try:
        return FRAMEWORKS[kind]
    except KeyError:
        raise KeyError(f"no framework for kind {kind!r}; known: {', '.join(sorted(FRAMEWORKS))}") from None


__all__ = ["Addressing", "FRAMEWORKS", "Framework", "ReplicaState", "get_framework",
           "JAXFramework", "MPIFramework", "PaddleFramework", "PyTorchFramework", "TensorFlowFramework",
           "XGBoostFramework"]
