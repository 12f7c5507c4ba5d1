"""Two JAX processes on CPU join one distributed runtime and sum across it.

Everything comes from the environment the operator sets: COORDINATOR_ADDRESS
(a host, no port), COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID. Process 0
starts the coordinator service on that port; every process connects to it,
then the CPU collectives (gloo) run a cross-process all-reduce: a global array
holding PROCESS_ID + 1 from each process is summed under jit, and the process
ids are all-gathered. Each process prints what it saw; exit 1 when a check
fails, so the job fails instead of "succeeding" wrongly.
"""
import os
import sys

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_cpu_collectives_implementation", "gloo")  # the default, stated

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

TIMEOUT_SECONDS = 60


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set: run this as a JAXJob replica")
    return value


def fail(pid, message):
    print(f"process {pid}: FAILED: {message}", flush=True)
    sys.exit(1)


def main():
    host, port = env("COORDINATOR_ADDRESS"), int(env("COORDINATOR_PORT"))
    n, pid = int(env("NUM_PROCESSES")), int(env("PROCESS_ID"))
    print(f"process {pid} of {n}: coordinator {host}:{port}", flush=True)
    jax.distributed.initialize(coordinator_address=f"{host}:{port}", num_processes=n, process_id=pid,
                               initialization_timeout=TIMEOUT_SECONDS)
    if (jax.process_count(), jax.process_index()) != (n, pid):
        fail(pid, f"joined as process {jax.process_index()} of {jax.process_count()}")
    print(f"process {pid}: process_count {jax.process_count()}, "
          f"{len(jax.devices())} devices ({len(jax.local_devices())} local)", flush=True)

    # One element per process, laid out over every device of every process.
    mesh = Mesh(np.array(jax.devices()), ("p",))
    local = np.full((len(jax.local_devices()),), pid + 1, dtype=np.int32)
    values = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("p")), local)
    replicated = NamedSharding(mesh, PartitionSpec())
    total = int(jax.jit(jnp.sum, out_shardings=replicated)(values).addressable_data(0))
    expected = sum(range(1, n + 1)) * len(jax.local_devices())
    ids = sorted(int(i) for i in multihost_utils.process_allgather(np.array([pid], dtype=np.int32)).ravel())
    print(f"process {pid}: sum {total} (expected {expected}), process ids {ids}", flush=True)
    if total != expected or ids != list(range(n)):
        fail(pid, "the processes disagree")
    multihost_utils.sync_global_devices("done")  # nobody leaves while another still needs it
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
