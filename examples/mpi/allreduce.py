"""MPI ranks started by mpirun, one per worker pod, all-reduce and check their world.

Run as ``mpirun -np N python3 -c <this file> N``: the launcher's mpirun reaches
each worker through the rsh agent the operator wrote (``kubexec.sh``), so every
rank runs inside a worker pod, with that pod's environment. Each rank prints
the pod it runs in (HOSTNAME, from the pod) and MPI's processor name; then the
ranks all-reduce rank + 1 through MPI buffers (the sum must be N(N+1)/2) and
all-gather their pods (one rank per pod). Exit 1 when a check fails, so the
job fails instead of "succeeding" wrongly.
"""
import os
import sys
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
expected = int(sys.argv[1]) if len(sys.argv) > 1 else size
pod = os.environ.get("HOSTNAME", "?")
print(f"rank {rank} of world size {size} in pod {pod} (processor {MPI.Get_processor_name()})", flush=True)

total = array("d", [0.0])
comm.Allreduce(array("d", [rank + 1.0]), total, op=MPI.SUM)
want = size * (size + 1) / 2
print(f"rank {rank}: all-reduce sum {total[0]:g} (expected {want:g})", flush=True)

pods = comm.allgather(pod)
errors = []
if size != expected:
    errors.append(f"world size {size}, expected {expected}")
if total[0] != want:
    errors.append(f"all-reduce sum {total[0]:g}, expected {want:g}")
if len(set(pods)) != size:
    errors.append(f"ranks share pods: {pods}")
if rank == 0:
    print(f"ranks ran in pods {pods}", flush=True)
    print("FAILED: " + "; ".join(errors) if errors else f"world size {size} OK", flush=True)
sys.exit(1 if errors else 0)
