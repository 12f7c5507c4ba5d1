"""Label, annotation and name constants (Kubeflow v1 + Volcano spellings)."""

LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"

ANNOTATION_GROUP_NAME = "scheduling.k8s.io/group-name"
# Volcano: the queue of the PodGroup made for a pod that has none (apis labels.go QueueNameAnnotationKey).
ANNOTATION_QUEUE_NAME = "scheduling.volcano.sh/queue-name"
# Volcano batch PodgroupNamePrefix: a pod's own PodGroup is "podgroup-<owner or pod uid>".
PODGROUP_NAME_PREFIX = "podgroup-"
ANNOTATION_TASK_SPEC = "volcano.sh/task-spec"
ANNOTATION_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# Local runtime (embedded mode): the local network writes these on Services.
ANNOTATION_ADDRESS = "phalanx.dev/address"        # the service's (= its pod's) loopback IP
ANNOTATION_HOST_PORTS = "phalanx.dev/host-ports"  # JSON {"<port name>": <effective host port>}
# Set by the job controller on the pods a finished job keeps: the node
# agent then treats the pod's restartPolicy as Never, so they run to their end.
ANNOTATION_NO_RESTART = "phalanx.dev/no-restart"
# Set by the job controller on its pods once the job's backoffLimit leaves no
# restart: the node agent no longer restarts a container that exited
# non-zero (a clean exit under Always still restarts), so the pod fails and the
# failure past the limit fails the job without a restart that was not granted.
ANNOTATION_NO_RESTART_ON_FAILURE = "phalanx.dev/no-restart-on-failure"

SCHEDULER_NAME = "volcano"
# What the apiserver puts in spec.schedulerName of a pod that names none.
DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_QUEUE = "default"
ROOT_QUEUE = "root"
DEFAULT_NAMESPACE = "default"

VOLCANO_VERSION = "scheduling.volcano.sh/v1beta1"

# Written by the scheduler on a Queue's metadata (only when they change): the proportion
# plugin's deserved share as a JSON resource list ({"cpu":"4","memory":"8Gi"}), and "true"
# while the queue is below it with pods waiting and can reclaim from another queue (absent otherwise).
ANNOTATION_DESERVED = "phalanx.dev/deserved"
ANNOTATION_RECLAIMING = "phalanx.dev/reclaiming"
# Warning Events the scheduler records on a victim's PodGroup when it evicts its pods.
REASON_PREEMPTED = "Preempted"
REASON_RECLAIMED = "Reclaimed"

# A pod the node agent stopped because the node (the control plane) shut down,
# as the kubelet's graceful node shutdown marks it: phase Failed, this reason
# and message, and a DisruptionTarget condition. Not a failure of the pod's own:
# the job controller recreates it without counting a restart.
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
REASON_TERMINATION_BY_KUBELET = "TerminationByKubelet"
NODE_SHUTDOWN_REASON = "Terminated"
NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
# A pod the scheduler evicts (preempt, reclaim) carries a DisruptionTarget condition with
# this reason before its graceful deletion: a preemption, not a failure of the pod's own.
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
