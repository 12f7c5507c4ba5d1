"""The scheduler's Prometheus series, with Volcano's names, labels and buckets
(pkg/scheduler/metrics/{metrics,queue}.go; the queue PodGroup counts of pkg/controllers/metrics).

One ``SchedulerMetrics`` per scheduler, on the ``CollectorRegistry`` it is given. It is a
collector: values live in plain dicts and lists (one event loop writes them, a scrape reads
them), so an observation costs a bisect and two additions, and the gauges of a session are
replaced as a whole. The driver (``framework.run_session``) reports timings and a
``SessionStats``; the shell reports sessions, bindings and where the Queue objects are.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from phalanx.scheduler.framework import SessionStats

ON_SESSION_OPEN = "OnSessionOpen"
ON_SESSION_CLOSE = "OnSessionClose"
STAGE_BOUND = "Bound"
STAGE_BIND = "Bind"


def exponential_buckets_range(low: float, high: float, count: int) -> tuple[float, ...]:
    """Go's ``prometheus.ExponentialBucketsRange``: ``count`` bounds from ``low`` to ``high``."""
    factor = (high / low) ** (1.0 / (count - 1))
    return tuple(low * factor ** i for i in range(count))


class Histogram:
    """A histogram (optionally labelled) whose ``observe`` is cheap: values in milliseconds."""

    def __init__(self, name: str, doc: str, buckets: tuple[float, ...], labels: tuple[str, ...] = ()) -> None:
        self.name, self.doc, self.bounds, self.labels = name, doc, buckets, labels
        self._series: dict[tuple[str, ...], list[float]] = {}  # label values -> [per-bucket counts..., +Inf, sum]

    def observe(self, value: float, *label_values: str) -> None:
        s = self._series.get(label_values)
        if s is None:
            s = self._series[label_values] = [0.0] * (len(self.bounds) + 2)
        s[bisect_left(self.bounds, value)] += 1
        s[-1] += value

    def count(self, *label_values: str) -> int:
        s = self._series.get(label_values)
        return int(sum(s[:-1])) if s else 0

    def family(self) -> Metric:
        fam = HistogramMetricFamily(self.name, self.doc, labels=list(self.labels))
        for values, s in sorted(self._series.items()):
            acc, buckets = 0.0, []
            for bound, n in zip((*self.bounds, float("inf")), s[:-1]):
                acc += n
                buckets.append((floatToGoString(bound), acc))
            fam.add_metric(list(values), buckets, s[-1])
        return fam


class SchedulerMetrics:
    """Volcano's scheduler series of one scheduler; registers itself on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.e2e = Histogram("volcano_e2e_scheduling_latency_milliseconds",
                             "Duration of a single scheduling session execution in milliseconds. It covers the entire "
                             "cycle from session open, action executions to session close.",
                             exponential_buckets_range(1, 5000, 20))
        self.open_session = Histogram("volcano_open_session_duration_milliseconds",
                                      "Duration of opening a scheduling session in milliseconds, including cache "
                                      "snapshot and session initialization.", exponential_buckets_range(1, 5000, 20))
        self.e2e_job = Histogram("volcano_e2e_job_scheduling_latency_milliseconds",
                                 "End-to-end job scheduling latency in milliseconds (histogram of per-job duration "
                                 "from creation to last task assumed)", exponential_buckets_range(100, 120000, 30))
        self.plugin_latency = Histogram("volcano_plugin_scheduling_latency_milliseconds",
                                        "Plugin scheduling latency in milliseconds",
                                        exponential_buckets_range(0.1, 100, 15), ("plugin", "OnSession"))
        self.action_latency = Histogram("volcano_action_scheduling_latency_milliseconds",
                                        "Action scheduling latency in milliseconds",
                                        exponential_buckets_range(1, 2000, 20), ("action",))
        self.task_latency = Histogram("volcano_task_scheduling_latency_milliseconds",
                                      "Task scheduling latency from creation to various stages in milliseconds",
                                      exponential_buckets_range(50, 60000, 30), ("stage",))
        self.stage_duration = Histogram("volcano_scheduling_stage_duration_milliseconds",
                                        "Duration of per-task scheduling stages (Predicate, Scoring, PreBind, Bind) "
                                        "in milliseconds", exponential_buckets_range(0.1, 500, 20), ("stage",))
        self._histograms = (self.e2e, self.open_session, self.e2e_job, self.plugin_latency, self.action_latency,
                            self.task_latency, self.stage_duration)
        self.attempts: dict[str, float] = {}  # result -> count
        self.job_duration: dict[tuple[str, str, str], float] = {}  # (job_name, queue, job_namespace) -> ms
        self._jobs: list[str] = []  # the jobs of the last session (a job's gauges live while it is there)
        self.unschedule_tasks: dict[str, int] = {}  # job name -> tasks short of its gang, last session
        self.queues: dict[str, tuple[float, ...]] = {}  # queue -> QUEUE_GAUGES values, last session
        # The Queue objects as the scheduler sees them: their status counts PodGroups per phase.
        self.queue_objects: Callable[[], Iterable[Any]] | None = None
        self.registry.register(self)

    # ---- the driver (framework.run_session) --------------------------------------------
    def opened(self, seconds: float) -> None:
        self.open_session.observe(seconds * 1000.0)

    def plugin(self, name: str, phase: str, seconds: float) -> None:
        self.plugin_latency.observe(seconds * 1000.0, name, phase)

    def action(self, name: str, seconds: float) -> None:
        self.action_latency.observe(seconds * 1000.0, name)

    # ---- the shell ------------------------------------------------------------------------
    def session(self, seconds: float, stats: SessionStats | None) -> None:
        """A session ran (open to close, ``seconds``); its stats replace the last session's gauges."""
        self.e2e.observe(seconds * 1000.0)
        if stats is None:
            return
        durations, observe = self.job_duration, self.e2e_job.observe
        for key, ms in stats.scheduled_jobs:
            durations[key] = ms
            observe(ms)
        self._jobs = stats.jobs  # kept as given: a scrape reads them, a session only swaps them
        self.unschedule_tasks = stats.unready
        if stats.unschedulable_tasks:
            self.attempts["unschedulable"] = self.attempts.get("unschedulable", 0.0) + stats.unschedulable_tasks
        self.queues = stats.queues

    def _prune(self) -> set[str]:
        """Forget the per-job durations of jobs no longer in the sessions; the live job names."""
        live = set(self._jobs)
        for key in [k for k in self.job_duration if k[0] not in live]:
            del self.job_duration[key]
        return live

    def bound(self, age: float | None, bind_seconds: float) -> None:
        """A binding was written: ``age`` seconds after the pod's creation, the write took ``bind_seconds``."""
        self.attempts["scheduled"] = self.attempts.get("scheduled", 0.0) + 1
        self.stage_duration.observe(bind_seconds * 1000.0, STAGE_BIND)
        if age is not None:
            self.task_latency.observe(age * 1000.0, STAGE_BOUND)

    def bind_failed(self) -> None:
        self.attempts["error"] = self.attempts.get("error", 0.0) + 1

    # ---- the collector ----------------------------------------------------------------------
    def describe(self) -> list[Metric]:
        """The families' names, without samples (the registry refuses a name registered twice)."""
        return [*(HistogramMetricFamily(h.name, h.doc, labels=list(h.labels)) for h in self._histograms),
                *self._families(empty=True)]

    def collect(self) -> Iterator[Metric]:
        for h in self._histograms:
            yield h.family()
        yield from self._families()

    def _families(self, empty: bool = False) -> Iterator[Metric]:
        attempts = CounterMetricFamily("volcano_schedule_attempts_total",
                                       "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
                                       "could not be scheduled, while 'error' means an internal scheduler problem.",
                                       labels=["result"])
        job_labels = ["job_name", "queue", "job_namespace"]
        duration = GaugeMetricFamily("volcano_e2e_job_scheduling_duration",
                                     "Per-job duration from job creation to last task assumed in scheduler cache, in "
                                     "milliseconds", labels=job_labels)
        tasks = GaugeMetricFamily("volcano_unschedule_task_count", "Number of tasks could not be scheduled",
                                  labels=["job_id"])
        jobs = GaugeMetricFamily("volcano_unschedule_job_count", "Number of jobs could not be scheduled")
        queue_fams = [GaugeMetricFamily(f"volcano_queue_{n}", doc, labels=["queue_name"]) for n, doc in QUEUE_GAUGES]
        pg_fams = [GaugeMetricFamily(f"volcano_queue_pod_group_{phase.lower()}_count",
                                     f"The number of {phase} PodGroup in this queue", labels=["queue_name"])
                   for phase in PODGROUP_PHASES]
        if not empty:
            live = self._prune()
            for result in sorted(self.attempts):
                attempts.add_metric([result], self.attempts[result])
            for key in sorted(self.job_duration):
                duration.add_metric(list(key), self.job_duration[key])
            for name in sorted(live):  # Volcano's gang close: every job, 0 when its gang is complete
                tasks.add_metric([name], float(self.unschedule_tasks.get(name, 0)))
            jobs.add_metric([], float(len(self.unschedule_tasks)))
            for queue in sorted(self.queues):
                for fam, v in zip(queue_fams, self.queues[queue]):
                    fam.add_metric([queue], v)
            for queue, status in sorted(self._queue_statuses()):
                for fam, phase in zip(pg_fams, PODGROUP_PHASES):
                    fam.add_metric([queue], float(_count(status.get(phase.lower()))))
        yield from (attempts, duration, tasks, jobs, *queue_fams, *pg_fams)

    def _queue_statuses(self) -> list[tuple[str, dict]]:
        if self.queue_objects is None:
            return []
        out = []
        for q in self.queue_objects():
            if isinstance(q, dict):
                name = (q.get("metadata") or {}).get("name")
                status = q.get("status")
                if isinstance(name, str):
                    out.append((name, status if isinstance(status, dict) else {}))
        return out


def _count(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


# The order of framework.QueueFigures' values.
QUEUE_GAUGES = (
    ("allocated_milli_cpu", "Allocated CPU count for one queue"),
    ("allocated_memory_bytes", "Allocated memory for one queue"),
    ("request_milli_cpu", "Request CPU count for one queue"),
    ("request_memory_bytes", "Request memory for one queue"),
    ("deserved_milli_cpu", "Deserved CPU count for one queue"),
    ("deserved_memory_bytes", "Deserved memory for one queue"),
    ("inqueue_milli_cpu", "Inqueue CPU for admitted but not yet running jobs in one queue"),
    ("inqueue_memory_bytes", "Inqueue memory for admitted but not yet running jobs in one queue"),
    ("share", "Share for one queue"),
    ("weight", "Weight for one queue"),
    ("overused", "If one queue is overused"),
)
PODGROUP_PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
