"""Plugin binpack: prefer the node that is fullest after placing the task.

Volcano plugins/binpack#BinPackingScore, over the resources the task requests
that have a weight (cpu, memory, and those listed in ``binpack_resources``):

    s_r   = w_r * (used_r + request_r) / allocatable_r    (0 if allocatable_r or w_r is 0)
    score = 100 * weight * sum(s_r) / sum(w_r)

and 0 for the whole node when any resource would overflow. ``used`` is the
node's Used (bound, binding, allocated and releasing tasks; not pipelined).
"""
from __future__ import annotations

from phalanx.scheduler.info import NodeInfo, TaskInfo
from phalanx.scheduler.session import Plugin, Session

MAX_NODE_SCORE = 100.0


class BinpackPlugin(Plugin):
    name = "binpack"

    def on_session_open(self, ssn: Session) -> None:
        c = self.config
        if c.binpack_weight <= 0:
            return  # weight 0 disables the plugin (negative resets to 1 in Volcano; treated as off)
        w = {"cpu": c.binpack_cpu if c.binpack_cpu >= 0 else 1.0,
             "memory": c.binpack_memory if c.binpack_memory >= 0 else 1.0}
        for name, v in c.binpack_resources.items():
            w[name] = v if v >= 0 else 1.0
        weights = [(i, w[name]) for i, name in enumerate(ssn.dims.names) if name in w]
        factor = MAX_NODE_SCORE * c.binpack_weight

        def score(task: TaskInfo, node: NodeInfo) -> float:
            total = 0.0
            wsum = 0.0
            req = task.resreq
            alloc = node.allocatable
            used = node.used
            for i, wr in weights:
                r = req[i]
                if r == 0:
                    continue
                a = alloc[i]
                if a == 0 or wr == 0:
                    wsum += wr
                    continue
                after = used[i] + r
                if after > a:
                    return 0.0
                total += after * wr / a
                wsum += wr
            if wsum > 0:
                total /= wsum
            return total * factor

        ssn.add_node_order_fn(score)
