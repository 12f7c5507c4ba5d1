"""``python -m phalanx ...``: the ``phalanx`` command, reachable through one interpreter.

The MPI launcher's rsh agent runs ``<python> -m phalanx exec ...``: the same
interpreter as the control plane, whether or not ``phalanx`` is on the pods' PATH.
"""
from phalanx.cli.main import app

if __name__ == "__main__":
    app(prog_name="phalanx")
