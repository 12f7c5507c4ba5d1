"""TF_CONFIG without TensorFlow: the replicas of a TFJob find each other.

Each replica parses TF_CONFIG ({"cluster": {"ps": [...], "worker": [...]},
"task": {"type", "index"}}) as TensorFlow would. A PS listens on the port of
its own entry; every worker connects, from its own address, to every PS
address in the cluster and sends its index; a PS checks that it heard from
each worker, from the address that worker has in TF_CONFIG, then answers them
all and exits 0. A worker exits 0 once every PS answered. Anything missing
before the deadline exits 1.
"""
import json
import os
import socket
import sys
import time

DEADLINE = time.monotonic() + 60  # seconds for the whole exchange


def log(message):
    print(message, flush=True)


def split(address):
    host, _, port = address.rpartition(":")
    return host, int(port)


def resolve(host):
    """IPv4 address of a peer; a name resolves once that peer's pod runs."""
    while True:
        try:
            return socket.gethostbyname(host)
        except OSError:
            if time.monotonic() > DEADLINE:
                raise
            time.sleep(0.05)


def read_line(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(64)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def run_ps(cluster, index):
    me = cluster["ps"][index]
    workers = cluster.get("worker", [])
    server = socket.create_server(("", split(me)[1]))  # every address, as a container listens
    server.settimeout(1.0)
    log(f"ps {index}: listening at {me} for {len(workers)} workers")
    heard = {}
    while len(heard) < len(workers):
        if time.monotonic() > DEADLINE:
            log(f"ps {index}: FAILED: heard only from workers {sorted(heard)}")
            return 1
        try:
            conn, (peer_ip, peer_port) = server.accept()
        except socket.timeout:
            continue
        conn.settimeout(10)
        words = read_line(conn).split()
        if len(words) != 2 or words[0] != "worker" or not words[1].isdigit() or int(words[1]) >= len(workers):
            log(f"ps {index}: ignoring {peer_ip}:{peer_port}: {' '.join(words)!r}")
            conn.close()
            continue
        w = int(words[1])
        expected_ip = resolve(split(workers[w])[0])
        if peer_ip != expected_ip:
            log(f"ps {index}: FAILED: worker {w} came from {peer_ip}, TF_CONFIG says {workers[w]} ({expected_ip})")
            return 1
        log(f"ps {index}: heard from worker {w} at {peer_ip} ({workers[w]})")
        heard[w] = conn
    log(f"ps {index}: heard from every worker {sorted(heard)}")
    for w, conn in heard.items():
        conn.sendall(f"ps {index} heard {len(heard)} workers\n".encode())
        conn.close()
    return 0


def run_worker(cluster, index):
    own_ip = resolve(split(cluster["worker"][index])[0])
    for p, address in enumerate(cluster.get("ps", [])):
        host, port = split(address)
        while True:
            try:
                conn = socket.create_connection((resolve(host), port), timeout=10, source_address=(own_ip, 0))
                break
            except OSError:  # the PS is not listening yet
                if time.monotonic() > DEADLINE:
                    log(f"worker {index}: FAILED: cannot connect to ps {p} at {address}")
                    return 1
                time.sleep(0.05)
        conn.sendall(f"worker {index}\n".encode())
        conn.settimeout(max(1.0, DEADLINE - time.monotonic()))
        answer = read_line(conn)
        conn.close()
        if not answer.startswith(f"ps {p} heard"):
            log(f"worker {index}: FAILED: ps {p} at {address} answered {answer!r}")
            return 1
        log(f"worker {index}: connected from {own_ip} to ps {p} at {address}; it says: {answer}")
    return 0


def main():
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        sys.exit("TF_CONFIG is not set: run this as a distributed TFJob")
    config = json.loads(raw)
    cluster, task = config["cluster"], config["task"]
    log(f"{task['type']} {task['index']}: TF_CONFIG cluster {json.dumps(cluster, sort_keys=True)}")
    if task["type"] == "ps":
        return run_ps(cluster, task["index"])
    if task["type"] == "worker":
        return run_worker(cluster, task["index"])
    log(f"task type {task['type']!r} has nothing to do here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
