"""Descriptions for the published OpenAPI schemas (what ``kubectl explain`` prints).

Keyed by the pydantic model's class name, then by wire field name; ``""`` is
the type's own description. Data only: ``openapi.py`` attaches them, so the
models stay free of user documentation and a missing entry just means no text.
"""
from __future__ import annotations

from phalanx.server.openapi_docs_autoscaling import AUTOSCALING_DESCRIPTIONS

API_VERSION = ("APIVersion defines the versioned schema of this representation of an object. Servers should "
               "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
               "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources")
KIND = ("Kind is a string value representing the REST resource this object represents. Servers may infer this "
        "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")
METADATA = ("Standard object's metadata. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
LIST_METADATA = ("Standard list metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds")
_NAME = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
         "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
         "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
         "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_CREATION_TIMESTAMP = ("CreationTimestamp is a timestamp representing the server time when this object was "
                       "created. It is not guaranteed to be set in happens-before order across separate "
                       "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
                       "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
                       "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")

_OBJECT_META = {
    "": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
    "name": _NAME,
    "generateName": "An optional prefix used by the server to generate a unique name when name is not provided: "
                    "the server appends a random suffix. Only applied if name is empty.",
    "namespace": "The namespace the object lives in (a DNS label). Empty means \"default\" for namespaced kinds; "
                 "cluster-scoped kinds (Namespace, Node, Queue) have no namespace.",
    "selfLink": "Deprecated and not set by the server.",
    "uid": "UID is the unique in time and space value for this object, set by the server on creation. Read-only.",
    "resourceVersion": "An opaque value that changes on every write of the object, used for optimistic concurrency "
                       "(an update carrying a stale value is refused with 409 Conflict) and as the starting point "
                       "of watches. Read-only.",
    "generation": "A sequence number representing a specific generation of the desired state: it increments when "
                  "the spec changes. Populated by the system. Read-only.",
    "creationTimestamp": _CREATION_TIMESTAMP,
    "deletionTimestamp": "RFC 3339 time at which this object will be deleted, set when a graceful deletion is "
                         "requested (pods bound to a node). The object stays, terminating, until then. Read-only.",
    "deletionGracePeriodSeconds": "Seconds allowed for this object to terminate gracefully before it is removed. "
                                  "Only set when deletionTimestamp is also set. Read-only.",
    "labels": "Map of string keys and values that can be used to organize and categorize (scope and select) "
              "objects. May match selectors of replication controllers and services. More info: "
              "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels",
    "annotations": "Annotations is an unstructured key value map stored with a resource that may be set by external "
                   "tools to store and retrieve arbitrary metadata. They are not queryable and should be preserved "
                   "when modifying objects. More info: "
                   "https://kubernetes.io/docs/concepts/overview/working-with-objects/annotations",
    "ownerReferences": "List of objects this object depends on. When every owner is gone, the garbage collector "
                       "deletes this object.",
    "finalizers": "Must be empty before the object is deleted from the registry.",
    "managedFields": "Which manager wrote which fields, kept for clients that read it. Phalanx stores what it is "
                     "given and does not compute it.",
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    # --- apimachinery meta/v1 ----------------------------------------------------
    "ObjectMeta": _OBJECT_META,
    "TemplateMeta": _OBJECT_META,
    "OwnerReference": {
        "": "OwnerReference contains enough information to let you identify an owning object. An owning object "
            "must be in the same namespace as the dependent, or be cluster-scoped, so there is no namespace field.",
        "apiVersion": "API version of the referent.",
        "kind": "Kind of the referent.",
        "name": "Name of the referent.",
        "uid": "UID of the referent.",
        "controller": "If true, this reference points to the managing controller.",
        "blockOwnerDeletion": "If true, and the owner has the foregroundDeletion finalizer, the owner cannot be "
                              "deleted from the key-value store until this reference is removed.",
    },
    "LabelSelector": {
        "": "A label selector is a label query over a set of resources. The result of matchLabels and "
            "matchExpressions are ANDed. An empty label selector matches all objects.",
        "matchLabels": "A map of {key,value} pairs; each is equivalent to an element of matchExpressions whose key "
                       "field is \"key\", the operator is \"In\", and the values array contains only \"value\".",
        "matchExpressions": "A list of label selector requirements. The requirements are ANDed.",
    },
    "LabelSelectorRequirement": {
        "": "A selector that contains values, a key, and an operator that relates the key and values.",
        "key": "The label key that the selector applies to.",
        "operator": "A key's relationship to a set of values: In, NotIn, Exists or DoesNotExist.",
        "values": "An array of string values. Non-empty for In and NotIn, empty for Exists and DoesNotExist.",
    },
    # --- kubeflow.org/v1 ------------------------------------------------------------
    "PyTorchJob": {
        "": "PyTorchJob represents a distributed PyTorch training job: a Master and Workers gang-scheduled as one "
            "PodGroup, with the torch.distributed environment injected into every pod.",
        "spec": "Specification of the desired state of the PyTorchJob.",
        "status": "Most recently observed status of the PyTorchJob. Read-only (written by the job controller).",
    },
    "TFJob": {
        "": "TFJob represents a distributed TensorFlow training job: Chief/Master, PS, Worker and Evaluator "
            "replicas gang-scheduled as one PodGroup, each given its TF_CONFIG.",
        "spec": "Specification of the desired state of the TFJob.",
        "status": "Most recently observed status of the TFJob. Read-only (written by the job controller).",
    },
    "PyTorchJobSpec": {
        "": "PyTorchJobSpec is the desired state of a PyTorchJob.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
        "elasticPolicy": "ElasticPolicy makes the job elastic (torchrun rendezvous with a min and max number of "
                         "workers).",
        "pytorchReplicaSpecs": "A map of replica type (Master, Worker) to its ReplicaSpec. For example,\n"
                               "  {\n    \"Master\": ReplicaSpec,\n    \"Worker\": ReplicaSpec,\n  }",
        "nprocPerNode": "Number of workers per node: \"auto\", \"cpu\", \"gpu\" or an integer. Sets "
                        "PET_NPROC_PER_NODE. Defaults to \"auto\".",
    },
    "TFJobSpec": {
        "": "TFJobSpec is the desired state of a TFJob.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
        "successPolicy": "When the job counts as succeeded: \"\" (the default: when the chief, or worker 0 if there "
                         "is no chief, succeeds) or \"AllWorkers\" (when every worker succeeded).",
        "tfReplicaSpecs": "A map of replica type (Chief, Master, PS, Worker, Evaluator) to its ReplicaSpec. For "
                          "example,\n  {\n    \"PS\": ReplicaSpec,\n    \"Worker\": ReplicaSpec,\n  }",
        "enableDynamicWorker": "If true, workers may join and leave the cluster at runtime (TF_CONFIG of the "
                               "workers lists only the PS).",
    },
    "XGBoostJob": {
        "": "XGBoostJob represents a distributed XGBoost training job: one Master (running the Rabit tracker) and "
            "Workers gang-scheduled as one PodGroup, each given MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK.",
        "spec": "Specification of the desired state of the XGBoostJob.",
        "status": "Most recently observed status of the XGBoostJob. Read-only (written by the job controller).",
    },
    "XGBoostJobSpec": {
        "": "XGBoostJobSpec is the desired state of an XGBoostJob.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
        "xgbReplicaSpecs": "A map of replica type (Master, Worker) to its ReplicaSpec. A Master with exactly 1 "
                           "replica is required. For example,\n  {\n    \"Master\": ReplicaSpec,\n"
                           "    \"Worker\": ReplicaSpec,\n  }",
    },
    "PaddleJob": {
        "": "PaddleJob represents a distributed PaddlePaddle training job: Workers (collective mode) or Masters "
            "(parameter servers) and Workers, gang-scheduled as one PodGroup, with PADDLE_MASTER, PADDLE_NNODES "
            "and PADDLE_JOB_ID injected into every pod.",
        "spec": "Specification of the desired state of the PaddleJob.",
        "status": "Most recently observed status of the PaddleJob. Read-only (written by the job controller).",
    },
    "PaddleJobSpec": {
        "": "PaddleJobSpec is the desired state of a PaddleJob.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
        "elasticPolicy": "ElasticPolicy holds the elastic policy of the job (minimum and maximum replicas).",
        "paddleReplicaSpecs": "A map of replica type (Master, Worker) to its ReplicaSpec. For example,\n  {\n"
                              "    \"Master\": ReplicaSpec,\n    \"Worker\": ReplicaSpec,\n  }",
    },
    "PaddleElasticPolicy": {
        "": "PaddleElasticPolicy bounds the number of replicas of an elastic PaddleJob.",
        "minReplicas": "Lower bound of the number of replicas. Defaults to maxReplicas, or to the Worker replicas.",
        "maxReplicas": "Upper bound of the number of replicas. Defaults to minReplicas, or to the Worker replicas.",
        "maxRestarts": "The limit of restarts of pods in elastic mode.",
        "metrics": "Metrics for scaling (autoscaling/v2 MetricSpec). Kept as given: no autoscaler is created for "
                   "a PaddleJob, as in the original.",
    },
    "JAXJob": {
        "": "JAXJob represents a distributed JAX training job: Workers gang-scheduled as one PodGroup, each given "
            "COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID for jax.distributed.",
        "spec": "Specification of the desired state of the JAXJob.",
        "status": "Most recently observed status of the JAXJob. Read-only (written by the job controller).",
    },
    "JAXJobSpec": {
        "": "JAXJobSpec is the desired state of a JAXJob.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
        "jaxReplicaSpecs": "A map of replica type (Worker only) to its ReplicaSpec. For example,\n  {\n"
                           "    \"Worker\": ReplicaSpec,\n  }",
    },
    "MPIJob": {
        "": "MPIJob represents an MPI job: one Launcher running mpirun and Workers it starts ranks on through "
            "the job's rsh agent (exec into the worker pods), with a hostfile in the job's ConfigMap.",
        "spec": "Specification of the desired state of the MPIJob.",
        "status": "Most recently observed status of the MPIJob. Read-only (written by the job controller).",
    },
    "MPIJobSpec": {
        "": "MPIJobSpec is the desired state of an MPIJob.",
        "slotsPerWorker": "Number of slots per worker in the hostfile (processes mpirun may start on each "
                          "worker). Defaults to 1.",
        "cleanPodPolicy": "Deprecated: use runPolicy.cleanPodPolicy, which wins when both are set; the chosen "
                          "value is stored in both. Defaults to None.",
        "mpiReplicaSpecs": "A map of replica type (Launcher, Worker) to its ReplicaSpec. A Launcher with exactly "
                           "1 replica is required; Worker replicas default to 0. For example,\n  {\n"
                           "    \"Launcher\": ReplicaSpec,\n    \"Worker\": ReplicaSpec,\n  }",
        "mainContainer": "Name of the container of the worker pods that runs the MPI processes (the rsh agent "
                         "execs into it). Defaults to the first container.",
        "runPolicy": "RunPolicy encapsulates the runtime policies of the job: pod cleanup, deadlines, retries, "
                     "TTL, suspension and gang scheduling.",
    },
    "RunPolicy": {
        "": "RunPolicy encapsulates various runtime policies of the distributed training job, for example how to "
            "clean up resources and how long the job can stay active.",
        "cleanPodPolicy": "Which pods to delete when the job finishes: All, Running (the ones still running) or "
                          "None. Defaults to None.",
        "ttlSecondsAfterFinished": "Seconds after the job finishes (succeeded or failed) before the job and its "
                                   "dependents are deleted. Unset means never.",
        "activeDeadlineSeconds": "Seconds, counted from status.startTime, the job may be active before it is "
                                 "failed with reason DeadlineExceeded and its running pods are terminated. Must "
                                 "be positive.",
        "backoffLimit": "Number of retries (pod restarts and failures) before the job is marked Failed with reason "
                        "BackoffLimitExceeded.",
        "schedulingPolicy": "SchedulingPolicy configures gang scheduling: the PodGroup's minimum members, "
                            "minimum resources, queue and priority.",
        "suspend": "If true, the job controller creates no pods, and suspending a running job deletes its active "
                   "pods and PodGroup. Resuming starts the job again. Defaults to false.",
        "managedBy": "The controller that reconciles this job: unset or \"kubeflow.org/training-operator\" for this "
                     "operator, \"kueue.x-k8s.io/multikueue\" to leave it to MultiKueue. Immutable.",
    },
    "SchedulingPolicy": {
        "": "SchedulingPolicy encapsulates the gang-scheduling parameters copied into the job's PodGroup.",
        "minAvailable": "Minimum number of pods that must be placeable together before any is started (the "
                        "PodGroup's minMember). Defaults to the total number of replicas.",
        "queue": "The Volcano queue the PodGroup is submitted to. Defaults to \"default\". Immutable once set.",
        "minResources": "Total resources the gang needs before it is admitted (the PodGroup's minResources). "
                        "Defaults to the sum of the requests (else limits) of the first minAvailable pods.",
        "priorityClass": "Name of the PriorityClass of the PodGroup.",
        "scheduleTimeoutSeconds": "Seconds the job may wait to be scheduled (used by the scheduler-plugins "
                                  "gang scheduler, not by Volcano).",
    },
    "ReplicaSpec": {
        "": "ReplicaSpec is a description of one replica type of the job: how many pods and their template.",
        "replicas": "Desired number of replicas of this type. Defaults to 1 (an MPIJob's Worker: 0).",
        "template": "The pod template of the replicas. Phalanx runs each container's command and args as a local "
                    "process; the image is recorded but not pulled.",
        "restartPolicy": "What happens when a replica's container exits: Always, OnFailure, Never, or ExitCode "
                         "(the failed pod is recreated only when its exit code is 128 or more, i.e. a signal). "
                         "The default depends on the kind (PyTorchJob, PaddleJob: OnFailure; TFJob, XGBoostJob, "
                         "JAXJob, MPIJob: Never).",
    },
    "ElasticPolicy": {
        "": "ElasticPolicy configures torchrun's elastic rendezvous.",
        "minReplicas": "Lower bound of the number of workers. Defaults to maxReplicas, or to the Worker replicas.",
        "maxReplicas": "Upper bound of the number of workers. Defaults to minReplicas, or to the Worker replicas.",
        "rdzvBackend": "Rendezvous backend: c10d, etcd or etcd-v2.",
        "rdzvPort": "Port of the rendezvous endpoint.",
        "rdzvHost": "Host of the rendezvous endpoint.",
        "rdzvId": "Rendezvous id shared by the workers.",
        "rdzvConf": "Extra rendezvous configuration (key=value pairs).",
        "standalone": "Start a local standalone rendezvous backend (torchrun --standalone).",
        "nProcPerNode": "Deprecated: use spec.nprocPerNode.",
        "maxRestarts": "Maximum number of worker group restarts before failing (torchrun --max-restarts).",
        "metrics": "Metrics for a HorizontalPodAutoscaler of the workers (autoscaling/v2 MetricSpec).",
    },
    "RDZVConf": {"": "A rendezvous configuration entry.", "key": "The key.", "value": "The value."},
    "JobStatus": {
        "": "JobStatus represents the current observed state of the training job.",
        "conditions": "The latest available observations of the job's state (Created, Running, Restarting, "
                      "Succeeded, Failed, Suspended). The last one is the job's state.",
        "replicaStatuses": "Per replica type: how many pods are active, succeeded and failed.",
        "startTime": "When the job was first acknowledged by the job controller (RFC 3339).",
        "completionTime": "When the job finished (RFC 3339).",
        "lastReconcileTime": "When the job was last reconciled (RFC 3339).",
    },
    "JobCondition": {
        "": "JobCondition describes the state of the job at a certain point.",
        "type": "Type of the condition: Created, Running, Restarting, Succeeded, Failed or Suspended.",
        "status": "Status of the condition: True, False or Unknown.",
        "reason": "A brief, CamelCase reason for the condition's last transition.",
        "message": "A human-readable message about the last transition.",
        "lastUpdateTime": "The last time this condition was updated.",
        "lastTransitionTime": "Last time the condition transitioned from one status to another.",
    },
    "ReplicaStatus": {
        "": "ReplicaStatus represents the current observed state of one replica type.",
        "active": "The number of pods that are running or pending.",
        "succeeded": "The number of pods that reached phase Succeeded.",
        "failed": "The number of pods that reached phase Failed.",
        "labelSelector": "Deprecated: use selector.",
        "selector": "A label selector, in string form, matching the pods of this replica type.",
    },
    # --- scheduling.volcano.sh/v1beta1 -------------------------------------------------
    "PodGroup": {
        "": "PodGroup is a collection of pods scheduled as a gang: none is bound until minMember of them fit.",
        "spec": "Specification of the desired behavior of the pod group.",
        "status": "Status of the pod group, written by the scheduler.",
    },
    "PodGroupSpec": {
        "": "PodGroupSpec represents the template of a pod group.",
        "minMember": "The minimal number of members/tasks to run the pod group; if there are not enough resources "
                     "to start all of them, the scheduler starts none.",
        "minTaskMember": "The minimal number of pods to run for each task role (pod annotation or label "
                         "volcano.sh/task-spec).",
        "minResources": "The minimal resources for the members of the pod group to run; the group is admitted "
                        "(Inqueue) only when its queue can hold them. Unset means admitted unconditionally.",
        "queue": "The queue the pod group is submitted to. Defaults to \"default\".",
        "priorityClassName": "The PriorityClass of the pod group, used to order it among others.",
        "networkTopology": "Network topology constraints of the group (hyper-node placement).",
        "subGroupPolicy": "Gang rules at the level of sub-groups of the pods.",
    },
    "PodGroupStatus": {
        "": "PodGroupStatus represents the current state of a pod group.",
        "phase": "Pending (waiting for admission), Inqueue (admitted, pods may be created), Running (at least "
                 "minMember pods running), Completed or Unknown.",
        "conditions": "The conditions of the pod group (Scheduled, Unschedulable) with the scheduler's reasons.",
        "running": "The number of running pods.",
        "succeeded": "The number of pods that succeeded.",
        "failed": "The number of pods that failed.",
    },
    "PodGroupCondition": {
        "": "PodGroupCondition contains details for the current state of a pod group.",
        "type": "Type of the condition: Scheduled or Unschedulable.",
        "status": "Status of the condition: True, False or Unknown.",
        "transitionID": "The ID of the scheduling session that made the transition.",
        "lastTransitionTime": "Last time the condition transitioned from one status to another.",
        "reason": "Unique, one-word, CamelCase reason for the condition's last transition "
                  "(NotEnoughResources, NotEnoughTasks, ...).",
        "message": "Human-readable message indicating details about the last transition.",
    },
    "NetworkTopologySpec": {
        "": "Network topology constraints.",
        "mode": "hard (must hold) or soft (best effort). Defaults to hard.",
        "highestTierAllowed": "The highest hyper-node tier the group may span.",
        "highestTierName": "The name of the highest tier the group may span.",
    },
    "SubGroupPolicy": {
        "": "A gang rule for a sub-group of the pod group's pods.",
        "name": "Name of the sub-group policy.",
        "subGroupSize": "The number of pods in one sub-group. Defaults to 1.",
        "minSubGroups": "The minimal number of sub-groups that must fit. Defaults to 0.",
        "labelSelector": "Selects the pods the policy applies to.",
        "matchLabelKeys": "Label keys whose values split the selected pods into sub-groups.",
        "networkTopology": "Network topology constraints of each sub-group.",
    },
    "Queue": {
        "": "Queue is a queue of PodGroups: it bounds and weights the resources the groups submitted to it get.",
        "spec": "Specification of the desired behavior of the queue.",
        "status": "The status of the queue.",
    },
    "QueueSpec": {
        "": "QueueSpec represents the template of a queue.",
        "weight": "The queue's share of the cluster relative to other queues (1..65535). Defaults to 1.",
        "capability": "Upper bound of the resources the queue's pod groups may use together.",
        "reclaimable": "Whether resources lent to this queue may be reclaimed by others. Unset means true.",
        "guarantee": "Resources reserved for this queue.",
        "deserved": "The amount of resources the queue deserves (capacity plugin).",
        "parent": "The parent queue in the hierarchy. Queues other than root default to root.",
        "priority": "Queues with a higher priority are served first. Must not be negative.",
        "dequeueStrategy": "How pod groups leave the queue: fifo (strict order) or traverse (skip a group that "
                           "does not fit). Defaults to traverse.",
        "affinity": "Node-group affinity of the queue's pods.",
        "type": "The type of the queue.",
        "extendClusters": "Clusters the queue extends to (multi-cluster scheduling).",
    },
    "QueueStatus": {
        "": "QueueStatus represents the status of a queue.",
        "state": "The state of the queue: Open, Closing, Closed or Unknown. Only an Open queue admits pod groups.",
        "allocated": "The resources currently allocated to the queue's pods, including its child queues.",
        "pending": "The number of pod groups in phase Pending.",
        "running": "The number of pod groups in phase Running.",
        "inqueue": "The number of pod groups in phase Inqueue.",
        "unknown": "The number of pod groups in phase Unknown.",
        "completed": "The number of pod groups in phase Completed.",
        "reservation": "Resources reserved for the queue.",
    },
    "Guarantee": {"": "Resources guaranteed to a queue.", "resource": "The guaranteed resources."},
    "QueueAffinity": {
        "": "Node-group affinity of a queue.",
        "nodeGroupAffinity": "Node groups the queue's pods should run on.",
        "nodeGroupAntiAffinity": "Node groups the queue's pods should avoid.",
    },
    "NodeGroupAffinity": {
        "": "Node-group scheduling rules.",
        "requiredDuringSchedulingIgnoredDuringExecution": "Node groups that must match.",
        "preferredDuringSchedulingIgnoredDuringExecution": "Node groups that should match.",
    },
    "Cluster": {"": "A member cluster of a queue.", "name": "Name of the cluster.",
                "weight": "Weight of the cluster.", "capacity": "Capacity of the cluster."},
    # --- core/v1 -------------------------------------------------------------------------
    "Pod": {
        "": "Pod is a collection of containers that run together on one node. In Phalanx every container is a "
            "local process.",
        "spec": "Specification of the desired behavior of the pod.",
        "status": "Most recently observed status of the pod, written by the node agent. Read-only.",
    },
    "PodTemplateSpec": {
        "": "PodTemplateSpec describes the data a pod should have when created from a template.",
        "metadata": "Standard object's metadata of the pods created from the template.",
        "spec": "Specification of the desired behavior of the pod.",
    },
    "PodSpec": {
        "": "PodSpec is a description of a pod.",
        "containers": "List of containers belonging to the pod. There must be at least one. Each runs its command "
                      "and args as a process, with its env.",
        "initContainers": "Containers run in order, each to successful completion, before the containers start. "
                          "An init container with restartPolicy Always is a sidecar that keeps running.",
        "ephemeralContainers": "Ephemeral containers (debugging); stored, not run.",
        "restartPolicy": "Restart policy for all containers within the pod: Always, OnFailure or Never. "
                         "Defaults to Always.",
        "terminationGracePeriodSeconds": "Seconds between SIGTERM and SIGKILL when the pod is deleted. Defaults "
                                         "to 30.",
        "activeDeadlineSeconds": "Seconds the pod may be active, counted from its start, before it is failed.",
        "dnsPolicy": "DNS policy of the pod.",
        "dnsConfig": "DNS parameters of the pod.",
        "nodeSelector": "Labels a node must have for the pod to be scheduled on it.",
        "nodeName": "The node the pod is bound to, set by the scheduler.",
        "affinity": "Scheduling constraints of the pod.",
        "tolerations": "Taints the pod tolerates.",
        "schedulerName": "The scheduler that places the pod (\"volcano\" for job pods).",
        "priorityClassName": "Name of the pod's PriorityClass.",
        "priority": "The pod's priority (higher first).",
        "preemptionPolicy": "Whether the pod may preempt lower-priority pods.",
        "serviceAccountName": "Name of the ServiceAccount the pod runs as.",
        "serviceAccount": "Deprecated alias of serviceAccountName.",
        "automountServiceAccountToken": "Whether a service account token is mounted.",
        "hostNetwork": "Use the host's network namespace (pods always do on Phalanx).",
        "hostIPC": "Use the host's IPC namespace.",
        "hostPID": "Use the host's PID namespace.",
        "hostUsers": "Use the host's user namespace.",
        "hostAliases": "Extra entries for the pod's hosts file.",
        "shareProcessNamespace": "Share one process namespace between the containers.",
        "securityContext": "Pod-level security attributes.",
        "imagePullSecrets": "Secrets for pulling images (images are not pulled on Phalanx).",
        "hostname": "The pod's hostname.",
        "subdomain": "The pod's subdomain (with a headless service of that name, <hostname>.<subdomain> resolves).",
        "setHostnameAsFQDN": "Set the hostname to the fully qualified domain name.",
        "volumes": "Volumes that can be mounted by the containers.",
        "runtimeClassName": "Name of the RuntimeClass.",
        "enableServiceLinks": "Inject environment variables for services.",
        "overhead": "Resource overhead of running the pod itself.",
        "topologySpreadConstraints": "How the pods spread across topology domains.",
        "readinessGates": "Extra conditions that must be True for the pod to be Ready.",
        "schedulingGates": "While any gate remains, the pod is not scheduled (status SchedulingGated).",
        "resourceClaims": "Dynamic resource claims of the pod.",
        "os": "The operating system of the pod's containers.",
    },
    "Container": {
        "": "A single application container that you want to run within a pod.",
        "name": "Name of the container, a DNS label unique within the pod. Cannot be updated.",
        "image": "Container image name. Recorded, not pulled: the command runs on this machine.",
        "imagePullPolicy": "Image pull policy: Always, Never or IfNotPresent.",
        "command": "Entrypoint array, executed directly as argv (never through a shell).",
        "args": "Arguments to the entrypoint.",
        "workingDir": "Working directory of the process.",
        "env": "Environment variables to set in the container.",
        "envFrom": "Sources to populate environment variables from.",
        "ports": "Ports the container exposes.",
        "resources": "Compute resources (cpu, memory, nvidia.com/gpu) the container requests and is limited to.",
        "resizePolicy": "Resize policy of the container's resources.",
        "restartPolicy": "Only for init containers: Always makes it a sidecar that runs alongside the containers.",
        "volumeMounts": "Pod volumes to mount into the container's filesystem.",
        "volumeDevices": "Block devices used by the container.",
        "livenessProbe": "Periodic probe of container liveness.",
        "readinessProbe": "Periodic probe of container service readiness.",
        "startupProbe": "Probe that the container has started.",
        "lifecycle": "Actions run on container start and stop.",
        "securityContext": "Security options of the container.",
        "stdin": "Allocate a buffer for stdin.",
        "stdinOnce": "Close stdin after the first attach.",
        "tty": "Allocate a TTY.",
        "terminationMessagePath": "File the container's termination message is read from.",
        "terminationMessagePolicy": "How the termination message is filled: File or FallbackToLogsOnError.",
    },
    "ContainerPort": {
        "": "ContainerPort represents a network port in a single container.",
        "name": "An IANA_SVC_NAME, unique within the pod, that services can refer to.",
        "containerPort": "Number of the port the process listens on (1..65535).",
        "protocol": "Protocol of the port: TCP, UDP or SCTP. Defaults to TCP.",
        "hostPort": "Number of the port to expose on the host.",
        "hostIP": "Host IP to bind the external port to.",
    },
    "EnvVar": {
        "": "EnvVar represents an environment variable present in a container.",
        "name": "Name of the environment variable.",
        "value": "The value; $(VAR_NAME) references to earlier variables are expanded.",
        "valueFrom": "Source for the variable's value. Cannot be used if value is not empty.",
    },
    "EnvVarSource": {
        "": "EnvVarSource represents a source for the value of an EnvVar.",
        "fieldRef": "A field of the pod: metadata.name, metadata.namespace, metadata.labels['<KEY>'], "
                    "metadata.annotations['<KEY>'], spec.nodeName, spec.serviceAccountName, status.hostIP, "
                    "status.podIP, status.podIPs.",
        "resourceFieldRef": "A resource of the container: limits.cpu, limits.memory, requests.cpu, "
                            "requests.memory, ...",
        "configMapKeyRef": "A key of a ConfigMap.",
        "secretKeyRef": "A key of a Secret in the pod's namespace.",
    },
    "ObjectFieldSelector": {"": "Selects a field of the object.", "apiVersion": "Version of the schema the "
                            "fieldPath is written in.", "fieldPath": "Path of the field to select."},
    "ResourceFieldSelector": {"": "Selects a resource of a container.", "containerName": "The container.",
                              "divisor": "Output format of the exposed resources. Defaults to 1.",
                              "resource": "The resource to select."},
    "KeySelector": {"": "Selects a key of a ConfigMap or Secret.", "key": "The key to select.",
                    "name": "Name of the referent.", "optional": "Whether the referent or its key must exist."},
    "LocalObjectReference": {"": "A reference to an object in the same namespace.", "name": "Name of the referent.",
                             "optional": "Whether the referent must exist."},
    "EnvFromSource": {"": "A source of a set of environment variables.",
                      "prefix": "A prefix prepended to every key.",
                      "configMapRef": "The ConfigMap to select from.", "secretRef": "The Secret to select from."},
    "ResourceRequirements": {
        "": "ResourceRequirements describes the compute resource requirements.",
        "limits": "The maximum amount of compute resources allowed. CPU limits are time shares on this machine.",
        "requests": "The minimum amount of compute resources required; the scheduler places pods by them. "
                    "Defaults to limits.",
        "claims": "Dynamic resource claims used by the container.",
    },
    "ResourceClaim": {"": "A reference to a pod resource claim.", "name": "Name of the claim.",
                      "request": "Name of the request within the claim."},
    "VolumeMount": {"": "A mounting of a volume within a container.", "name": "Name of the volume.",
                    "mountPath": "Path within the container.", "readOnly": "Mount read-only.",
                    "recursiveReadOnly": "Whether read-only mounts are recursively read-only.",
                    "subPath": "Path within the volume to mount.",
                    "subPathExpr": "Expanded path within the volume to mount.",
                    "mountPropagation": "How mounts are propagated."},
    "Toleration": {"": "The pod tolerates any taint that matches the triple <key,value,effect>.",
                   "key": "The taint key.", "operator": "Exists or Equal. Defaults to Equal.",
                   "value": "The taint value.", "effect": "The taint effect to match (empty matches all).",
                   "tolerationSeconds": "How long a NoExecute taint is tolerated."},
    "PodReadinessGate": {"": "A condition the pod's readiness depends on.",
                         "conditionType": "Type of a condition in the pod's condition list."},
    "PodSchedulingGate": {"": "A gate that holds the pod back from scheduling.", "name": "Name of the gate."},
    "Service": {
        "": "Service is a named abstraction of a set of pods. On Phalanx it gets a loopback address and the "
            "names <service>, <service>.<namespace>[.svc.cluster.local] resolve to it.",
        "spec": "Specification of the desired behavior of the service.",
        "status": "Most recently observed status of the service. Read-only.",
    },
    "ServiceSpec": {
        "": "ServiceSpec describes the attributes that a user creates on a service.",
        "selector": "Route service traffic to pods with label keys and values matching this selector.",
        "ports": "The list of ports exposed by this service.",
        "clusterIP": "The IP address of the service; \"None\" makes a headless service.",
        "clusterIPs": "The IP addresses of the service.",
        "type": "How the service is exposed: ClusterIP, NodePort, LoadBalancer or ExternalName.",
        "externalIPs": "IP addresses for which nodes also accept traffic for this service.",
        "externalName": "The external reference for type ExternalName.",
        "externalTrafficPolicy": "How external traffic is routed to endpoints.",
        "internalTrafficPolicy": "How cluster-internal traffic is routed to endpoints.",
        "healthCheckNodePort": "The health-check node port.",
        "sessionAffinity": "ClientIP or None.",
        "sessionAffinityConfig": "Session affinity configuration.",
        "loadBalancerIP": "Deprecated.",
        "loadBalancerSourceRanges": "Client IP ranges allowed through a load balancer.",
        "loadBalancerClass": "The load balancer implementation.",
        "allocateLoadBalancerNodePorts": "Whether node ports are allocated for a LoadBalancer service.",
        "publishNotReadyAddresses": "Publish addresses of pods that are not ready.",
        "ipFamilies": "IP families of the service.",
        "ipFamilyPolicy": "Dual-stack policy of the service.",
        "trafficDistribution": "Preference for how traffic is distributed.",
    },
    "ServicePort": {"": "ServicePort contains information on a service's port.",
                    "name": "The name of this port within the service (a DNS label).",
                    "protocol": "TCP, UDP or SCTP. Defaults to TCP.", "appProtocol": "The application protocol.",
                    "port": "The port exposed by this service.",
                    "targetPort": "Number or name of the port on the pods. Defaults to port.",
                    "nodePort": "The port on each node."},
    "Node": {
        "": "Node is a worker the scheduler places pods on. Phalanx's nodes are declared in cluster.yaml and "
            "share this machine.",
        "spec": "Spec defines the behavior of a node.",
        "status": "Most recently observed status of the node: capacity, allocatable, addresses, conditions.",
    },
    "NodeSpec": {"": "NodeSpec describes the attributes that a node is created with.",
                 "podCIDR": "The pod IP range of the node.", "podCIDRs": "The pod IP ranges of the node.",
                 "providerID": "ID of the node assigned by the cloud provider.",
                 "unschedulable": "If true, no new pods are scheduled on the node.",
                 "taints": "The node's taints.", "configSource": "Deprecated.", "externalID": "Deprecated."},
    "Taint": {"": "A taint repels pods that do not tolerate it.", "key": "The taint key.",
              "value": "The taint value.", "effect": "NoSchedule, PreferNoSchedule or NoExecute.",
              "timeAdded": "When the taint was added."},
    "Namespace": {"": "Namespace provides a scope for names.",
                  "spec": "Spec defines the behavior of the namespace.",
                  "status": "Status describes the current status of the namespace."},
    "ConfigMap": {"": "ConfigMap holds configuration data for pods to consume (an MPIJob's hostfile and rsh agent).",
                  "data": "Configuration data, UTF-8 strings by key.",
                  "binaryData": "Binary configuration data, base64-encoded by key.",
                  "immutable": "If true, the data cannot be updated (only the object deleted and recreated)."},
    "Secret": {"": "Secret holds secret data of a certain type (stored as given, not encrypted).",
               "data": "Secret data by key, each value base64-encoded.",
               "stringData": "Write-only plain-text data, merged into data (base64-encoded) on write.",
               "type": "Used to ease programmatic handling of secret data (default Opaque).",
               "immutable": "If true, the data cannot be updated (only the object deleted and recreated)."},
    "NamespaceSpec": {"": "NamespaceSpec describes the attributes on a namespace.",
                      "finalizers": "Must be empty before the namespace is removed."},
    "Event": {
        "": "Event is a report of an event somewhere in the cluster (Scheduled, Started, Failed, ...).",
        "involvedObject": "The object this event is about.",
        "reason": "A short, machine understandable string that gives the reason for the transition.",
        "message": "A human-readable description of the status of this operation.",
        "type": "Type of this event (Normal, Warning).",
        "source": "The component reporting this event.",
        "firstTimestamp": "The time at which the event was first recorded.",
        "lastTimestamp": "The time at which the most recent occurrence of this event was recorded.",
        "eventTime": "Time when this event was first observed (microseconds).",
        "count": "The number of times this event has occurred.",
        "series": "Data about the event series this event represents.",
        "action": "What action was taken or failed regarding the object.",
        "related": "Optional secondary object for more complex actions.",
        "reportingComponent": "Name of the controller that emitted this event.",
        "reportingInstance": "ID of the controller instance.",
    },
    "ObjectReference": {"": "A reference to an object.", "apiVersion": "API version of the referent.",
                        "kind": "Kind of the referent.", "namespace": "Namespace of the referent.",
                        "name": "Name of the referent.", "uid": "UID of the referent.",
                        "resourceVersion": "The referent's resourceVersion.",
                        "fieldPath": "A part of the object, e.g. spec.containers{name}."},
    "EventSource": {"": "The source of an event.", "component": "Component from which the event is generated.",
                    "host": "Node name on which the event is generated."},
    "PriorityClass": {
        "": "PriorityClass defines mapping from a priority class name to the priority integer value.",
        "value": "The priority that pods naming this class in their spec receive (higher first).",
        "globalDefault": "Whether this is the priority of pods that name no class (at most one default).",
        "description": "When this priority class should be used.",
        "preemptionPolicy": "Never or PreemptLowerPriority (the default): whether its pods preempt lower ones."},
    **AUTOSCALING_DESCRIPTIONS,
}
