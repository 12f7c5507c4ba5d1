"""`describe` against real kubectl 1.32 output (docs/REFERENCE.md kubectl-output 17 and
18; the pod is docs/REFERENCE.md golden 58's body, its events docs/REFERENCE.md golden 55's), plus the
describers' other branches."""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import yaml

from phalanx.cli.describe import describe
from phalanx.cli.describe.common import BINARY_SI, canonical_quantity, quantity_value, rfc1123z
from phalanx.cli.describe.unstructured import camelcase_split, smart_label
from phalanx.cli.describe.volcano import waiting_reason


def T(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


NOW = T("2026-11-29T07:16:24Z")

# exchanges/58 response body (managedFields dropped)
POD = {'kind': 'Pod',
 'apiVersion': 'v1',
 'metadata': {'name': 'pytest-worker-0',
              'namespace': 'default',
              'uid': '221f3aa1-e669-4b11-b07e-4a89f3f9fba2',
              'resourceVersion': '380',
              'generation': 2,
              'creationTimestamp': '2026-11-29T07:15:09Z',
              'labels': {'example.com/jsonpatch': 'yes',
                         'example.com/tier': 'training',
                         'training.kubeflow.org/job-name': 'pytest',
                         'training.kubeflow.org/operator-name': 'pytorchjob-controller',
                         'training.kubeflow.org/replica-index': '0',
                         'training.kubeflow.org/replica-type': 'worker'},
              'annotations': {'scheduling.k8s.io/group-name': 'pytest'},
              'ownerReferences': [{'apiVersion': 'kubeflow.org/v1',
                                   'kind': 'PyTorchJob',
                                   'name': 'pytest',
                                   'uid': 'dd780d46-45c9-468d-bb1a-f17b6c90e612',
                                   'controller': True,
                                   'blockOwnerDeletion': True}]},
 'spec': {'volumes': [{'name': 'kube-api-access-7pp7l',
                       'projected': {'sources': [{'serviceAccountToken': {'expirationSeconds': 3607,
                                                                          'path': 'token'}},
                                                 {'configMap': {'name': 'kube-root-ca.crt',
                                                                'items': [{'key': 'ca.crt',
                                                                           'path': 'ca.crt'}]}},
                                                 {'downwardAPI': {'items': [{'path': 'namespace',
                                                                             'fieldRef': {'apiVersion': 'v1',
                                                                                          'fieldPath': 'metadata.namespace'}}]}},
                                                 {'configMap': {'name': 'openshift-service-ca.crt',
                                                                'items': [{'key': 'service-ca.crt',
                                                                           'path': 'service-ca.crt'}]}}],
                                     'defaultMode': 420}}],
          'initContainers': [{'name': 'init-pytorch',
                              'image': 'alpine:3.10',
                              'command': ['sh',
                                          '-c',
                                          'err=1;for i in $(seq 100); do if nslookup pytest-master-0; then '
                                          'err=0 && break; fi;echo waiting for master; sleep 2; done; exit '
                                          '$err'],
                              'resources': {'limits': {'cpu': '100m', 'memory': '20Mi'},
                                            'requests': {'cpu': '50m', 'memory': '10Mi'}},
                              'volumeMounts': [{'name': 'kube-api-access-7pp7l',
                                                'readOnly': True,
                                                'mountPath': '/var/run/secrets/kubernetes.io/serviceaccount'}],
                              'terminationMessagePath': '/dev/termination-log',
                              'terminationMessagePolicy': 'File',
                              'imagePullPolicy': 'IfNotPresent'}],
          'containers': [{'name': 'pytorch',
                          'image': 'busybox:1.37.0-glibc',
                          'command': ['sh', '-c', 'trap exit INT TERM; sleep 30s & wait'],
                          'ports': [{'name': 'pytorchjob-port', 'containerPort': 23456, 'protocol': 'TCP'}],
                          'env': [{'name': 'PYTHONUNBUFFERED', 'value': '1'},
                                  {'name': 'MASTER_PORT', 'value': '23456'},
                                  {'name': 'PET_MASTER_PORT', 'value': '23456'},
                                  {'name': 'MASTER_ADDR', 'value': 'pytest-master-0'},
                                  {'name': 'PET_MASTER_ADDR', 'value': 'pytest-master-0'},
                                  {'name': 'WORLD_SIZE', 'value': '4'},
                                  {'name': 'RANK', 'value': '1'},
                                  {'name': 'PET_NODE_RANK', 'value': '1'},
                                  {'name': 'PET_NPROC_PER_NODE', 'value': 'auto'},
                                  {'name': 'PET_NNODES', 'value': '4'}],
                          'resources': {'limits': {'cpu': '1', 'memory': '100Mi'},
                                        'requests': {'cpu': '1', 'memory': '100Mi'}},
                          'volumeMounts': [{'name': 'kube-api-access-7pp7l',
                                            'readOnly': True,
                                            'mountPath': '/var/run/secrets/kubernetes.io/serviceaccount'}],
                          'terminationMessagePath': '/dev/termination-log',
                          'terminationMessagePolicy': 'File',
                          'imagePullPolicy': 'IfNotPresent'}],
          'restartPolicy': 'OnFailure',
          'terminationGracePeriodSeconds': 30,
          'activeDeadlineSeconds': 3600,
          'dnsPolicy': 'ClusterFirst',
          'serviceAccountName': 'default',
          'serviceAccount': 'default',
          'nodeName': 'las1',
          'securityContext': {},
          'schedulerName': 'volcano',
          'tolerations': [{'key': 'node.kubernetes.io/not-ready',
                           'operator': 'Exists',
                           'effect': 'NoExecute',
                           'tolerationSeconds': 300},
                          {'key': 'node.kubernetes.io/unreachable',
                           'operator': 'Exists',
                           'effect': 'NoExecute',
                           'tolerationSeconds': 300}],
          'priority': 0,
          'enableServiceLinks': True,
          'preemptionPolicy': 'PreemptLowerPriority'},
 'status': {'phase': 'Running',
            'conditions': [{'type': 'PodReadyToStartContainers',
                            'status': 'True',
                            'lastProbeTime': None,
                            'lastTransitionTime': '2026-11-29T07:14:42Z'},
                           {'type': 'Initialized',
                            'status': 'True',
                            'lastProbeTime': None,
                            'lastTransitionTime': '2026-11-29T07:14:44Z'},
                           {'type': 'Ready',
                            'status': 'True',
                            'lastProbeTime': None,
                            'lastTransitionTime': '2026-11-29T07:14:46Z'},
                           {'type': 'ContainersReady',
                            'status': 'True',
                            'lastProbeTime': None,
                            'lastTransitionTime': '2026-11-29T07:14:46Z'},
                           {'type': 'PodScheduled',
                            'status': 'True',
                            'lastProbeTime': None,
                            'lastTransitionTime': '2026-11-29T07:14:40Z'}],
            'hostIP': '127.0.0.1',
            'hostIPs': [{'ip': '127.0.0.1'}],
            'podIP': '127.0.1.5',
            'podIPs': [{'ip': '127.0.1.5'}],
            'startTime': '2026-11-29T07:14:40Z',
            'initContainerStatuses': [{'name': 'init-pytorch',
                                       'state': {'terminated': {'exitCode': 0,
                                                                'reason': 'Completed',
                                                                'startedAt': '2026-11-29T07:14:41Z',
                                                                'finishedAt': '2026-11-29T07:14:44Z',
                                                                'containerID': 'containerd://000000000000000000000000000000000000000000000000000000000000000b'}},
                                       'lastState': {},
                                       'ready': True,
                                       'restartCount': 0,
                                       'image': 'docker.io/library/alpine:3.10',
                                       'imageID': 'docker.io/library/alpine@sha256:0000000000000000000000000000000000000000000000000000000000000002',
                                       'containerID': 'containerd://000000000000000000000000000000000000000000000000000000000000000b',
                                       'started': False}],
            'containerStatuses': [{'name': 'pytorch',
                                   'state': {'running': {'startedAt': '2026-11-29T07:14:45Z'}},
                                   'lastState': {},
                                   'ready': True,
                                   'restartCount': 0,
                                   'image': 'docker.io/library/busybox:1.37.0-glibc',
                                   'imageID': 'docker.io/library/busybox@sha256:0000000000000000000000000000000000000000000000000000000000000001',
                                   'containerID': 'containerd://0000000000000000000000000000000000000000000000000000000000000015',
                                   'started': True}],
            'qosClass': 'Burstable'}}


def pod_event(reason: str, message: str, ts: str, component: str = "kubelet", host: str | None = "las1") -> dict:
    source = {"component": component}
    if host:
        source["host"] = host
    return {"metadata": {"name": f"pytest-worker-0.{reason.lower()}", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "pytest-worker-0",
                               "uid": "221f3aa1-e669-4b11-b07e-4a89f3f9fba2", "apiVersion": "v1"},
            "reason": reason, "message": message, "source": source, "firstTimestamp": ts, "lastTimestamp": ts,
            "count": 1, "type": "Normal", "eventTime": None}


# exchanges/55, in the order the server listed them (by name)
POD_EVENTS = [
    pod_event("Created", "Created container: pytorch", "2026-11-29T07:15:07Z"),
    pod_event("Started", "Started container pytorch", "2026-11-29T07:15:08Z"),
    pod_event("Pulled", 'Container image "busybox:1.37.0-glibc" already present on machine', "2026-11-29T07:15:07Z"),
    pod_event("Scheduled", "Successfully assigned default/pytest-worker-0 to las1", "2026-11-29T07:15:03Z",
              component="volcano", host=None),
]

GOLDEN_17 = (
    'Name:             pytest-worker-0\n'
    'Namespace:        default\n'
    'Priority:         0\n'
    'Service Account:  default\n'
    'Node:             las1/127.0.0.1\n'
    'Start Time:       Sun, 29 Nov 2026 07:14:40 +0000\n'
    'Labels:           example.com/jsonpatch=yes\n'
    '                  example.com/tier=training\n'
    '                  training.kubeflow.org/job-name=pytest\n'
    '                  training.kubeflow.org/operator-name=pytorchjob-controller\n'
    '                  training.kubeflow.org/replica-index=0\n'
    '                  training.kubeflow.org/replica-type=worker\n'
    'Annotations:      scheduling.k8s.io/group-name: pytest\n'
    'Status:           Running\n'
    'IP:               127.0.1.5\n'
    'IPs:\n'
    '  IP:           127.0.1.5\n'
    'Controlled By:  PyTorchJob/pytest\n'
    'Init Containers:\n'
    '  init-pytorch:\n'
    '    Container ID:  containerd://000000000000000000000000000000000000000000000000000000000000000b\n'
    '    Image:         alpine:3.10\n'
    '    Image ID:      docker.io/library/alpine@sha256:0000000000000000000000000000000000000000000000000000000000000002\n'
    '    Port:          <none>\n'
    '    Host Port:     <none>\n'
    '    Command:\n'
    '      sh\n'
    '      -c\n'
    '      err=1;for i in $(seq 100); do if nslookup pytest-master-0; then err=0 && break; fi;echo waiting for master; sleep 2; done; exit $err\n'
    '    State:          Terminated\n'
    '      Reason:       Completed\n'
    '      Exit Code:    0\n'
    '      Started:      Sun, 29 Nov 2026 07:14:41 +0000\n'
    '      Finished:     Sun, 29 Nov 2026 07:14:44 +0000\n'
    '    Ready:          True\n'
    '    Restart Count:  0\n'
    '    Limits:\n'
    '      cpu:     100m\n'
    '      memory:  20Mi\n'
    '    Requests:\n'
    '      cpu:        50m\n'
    '      memory:     10Mi\n'
    '    Environment:  <none>\n'
    '    Mounts:\n'
    '      /var/run/secrets/kubernetes.io/serviceaccount from kube-api-access-7pp7l (ro)\n'
    'Containers:\n'
    '  pytorch:\n'
    '    Container ID:  containerd://0000000000000000000000000000000000000000000000000000000000000015\n'
    '    Image:         busybox:1.37.0-glibc\n'
    '    Image ID:      docker.io/library/busybox@sha256:0000000000000000000000000000000000000000000000000000000000000001\n'
    '    Port:          23456/TCP\n'
    '    Host Port:     0/TCP\n'
    '    Command:\n'
    '      sh\n'
    '      -c\n'
    '      trap exit INT TERM; sleep 30s & wait\n'
    '    State:          Running\n'
    '      Started:      Sun, 29 Nov 2026 07:14:45 +0000\n'
    '    Ready:          True\n'
    '    Restart Count:  0\n'
    '    Limits:\n'
    '      cpu:     1\n'
    '      memory:  100Mi\n'
    '    Requests:\n'
    '      cpu:     1\n'
    '      memory:  100Mi\n'
    '    Environment:\n'
    '      PYTHONUNBUFFERED:    1\n'
    '      MASTER_PORT:         23456\n'
    '      PET_MASTER_PORT:     23456\n'
    '      MASTER_ADDR:         pytest-master-0\n'
    '      PET_MASTER_ADDR:     pytest-master-0\n'
    '      WORLD_SIZE:          4\n'
    '      RANK:                1\n'
    '      PET_NODE_RANK:       1\n'
    '      PET_NPROC_PER_NODE:  auto\n'
    '      PET_NNODES:          4\n'
    '    Mounts:\n'
    '      /var/run/secrets/kubernetes.io/serviceaccount from kube-api-access-7pp7l (ro)\n'
    'Conditions:\n'
    '  Type                        Status\n'
    '  PodReadyToStartContainers   True \n'
    '  Initialized                 True \n'
    '  Ready                       True \n'
    '  ContainersReady             True \n'
    '  PodScheduled                True \n'
    'Volumes:\n'
    '  kube-api-access-7pp7l:\n'
    '    Type:                    Projected (a volume that contains injected data from multiple sources)\n'
    '    TokenExpirationSeconds:  3607\n'
    '    ConfigMapName:           kube-root-ca.crt\n'
    '    ConfigMapOptional:       <nil>\n'
    '    DownwardAPI:             true\n'
    '    ConfigMapName:           openshift-service-ca.crt\n'
    '    ConfigMapOptional:       <nil>\n'
    'QoS Class:                   Burstable\n'
    'Node-Selectors:              <none>\n'
    'Tolerations:                 node.kubernetes.io/not-ready:NoExecute op=Exists for 300s\n'
    '                             node.kubernetes.io/unreachable:NoExecute op=Exists for 300s\n'
    'Events:\n'
    '  Type    Reason     Age   From     Message\n'
    '  ----    ------     ----  ----     -------\n'
    '  Normal  Scheduled  81s   volcano  Successfully assigned default/pytest-worker-0 to las1\n'
    '  Normal  Created    77s   kubelet  Created container: pytorch\n'
    '  Normal  Pulled     77s   kubelet  Container image "busybox:1.37.0-glibc" already present on machine\n'
    '  Normal  Started    76s   kubelet  Started container pytorch\n')


def test_describe_pod_matches_kubectl_output_17():
    assert describe(POD, {"events": POD_EVENTS}, NOW) == GOLDEN_17


# kubectl-output/19 (last-applied annotation shortened)
JOB = yaml.safe_load(
    'apiVersion: kubeflow.org/v1\n'
    'kind: PyTorchJob\n'
    'metadata:\n'
    '  annotations:\n'
    '    kubectl.kubernetes.io/last-applied-configuration: |\n'
    '      {"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob"}\n'
    '  creationTimestamp: "2026-11-29T07:14:10Z"\n'
    '  generation: 3\n'
    '  name: pytest\n'
    '  namespace: default\n'
    '  resourceVersion: "388"\n'
    '  uid: dd780d46-45c9-468d-bb1a-f17b6c90e612\n'
    'spec:\n'
    '  pytorchReplicaSpecs:\n'
    '    Master:\n'
    '      replicas: 1\n'
    '      restartPolicy: OnFailure\n'
    '      template:\n'
    '        spec:\n'
    '          containers:\n'
    '          - command:\n'
    '            - sh\n'
    '            - -c\n'
    '            - trap exit INT TERM; sleep 30s & wait\n'
    '            image: busybox:1.37.0-glibc\n'
    '            imagePullPolicy: IfNotPresent\n'
    '            name: pytorch\n'
    '            resources:\n'
    '              limits:\n'
    '                cpu: "1"\n'
    '                memory: 100Mi\n'
    '    Worker:\n'
    '      replicas: 3\n'
    '      restartPolicy: OnFailure\n'
    '      template:\n'
    '        spec:\n'
    '          containers:\n'
    '          - command:\n'
    '            - sh\n'
    '            - -c\n'
    '            - trap exit INT TERM; sleep 30s & wait\n'
    '            image: busybox:1.37.0-glibc\n'
    '            imagePullPolicy: IfNotPresent\n'
    '            name: pytorch\n'
    '            resources:\n'
    '              limits:\n'
    '                cpu: "1"\n'
    '                memory: 100Mi\n'
    '  runPolicy:\n'
    '    backoffLimit: 3\n'
    '    suspend: false\n'
    'status:\n'
    '  conditions:\n'
    '  - lastTransitionTime: "2026-11-29T07:14:36Z"\n'
    '    lastUpdateTime: "2026-11-29T07:14:36Z"\n'
    '    message: PyTorchJob pytest is created.\n'
    '    reason: PyTorchJobCreated\n'
    '    status: "True"\n'
    '    type: Created\n'
    '  - lastTransitionTime: "2026-11-29T07:16:12Z"\n'
    '    lastUpdateTime: "2026-11-29T07:16:12Z"\n'
    '    message: PyTorchJob default/pytest is running.\n'
    '    reason: PyTorchJobRunning\n'
    '    status: "True"\n'
    '    type: Running\n'
    '  replicaStatuses:\n'
    '    Master:\n'
    '      active: 1\n'
    '      selector: training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master\n'
    '    Worker:\n'
    '      active: 3\n'
    '      selector: training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker\n'
    '  startTime: "2026-11-29T07:14:36Z"\n')


def job_event(reason: str, message: str, ts: str) -> dict:
    return {"involvedObject": {"kind": "PyTorchJob", "name": "pytest"}, "reason": reason, "message": message,
            "type": "Normal", "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
            "source": {"component": "pytorchjob-controller"}}


JOB_EVENTS = [
    job_event("SuccessfulCreateService", "Created service: pytest-master-0", "2026-11-29T07:15:02Z"),
    job_event("SuccessfulCreatePod", "Created pod: pytest-worker-0", "2026-11-29T07:15:02Z"),
    job_event("PyTorchJobRunning", "PyTorchJob pytest is running.", "2026-11-29T07:15:09Z"),
]

GOLDEN_18 = (
    'Name:         pytest\n'
    'Namespace:    default\n'
    'Labels:       <none>\n'
    'Annotations:  <none>\n'
    'API Version:  kubeflow.org/v1\n'
    'Kind:         PyTorchJob\n'
    'Metadata:\n'
    '  Creation Timestamp:  2026-11-29T07:14:10Z\n'
    '  Generation:          3\n'
    '  Resource Version:    388\n'
    '  UID:                 dd780d46-45c9-468d-bb1a-f17b6c90e612\n'
    'Spec:\n'
    '  Pytorch Replica Specs:\n'
    '    Master:\n'
    '      Replicas:        1\n'
    '      Restart Policy:  OnFailure\n'
    '      Template:\n'
    '        Spec:\n'
    '          Containers:\n'
    '            Command:\n'
    '              sh\n'
    '              -c\n'
    '              trap exit INT TERM; sleep 30s & wait\n'
    '            Image:              busybox:1.37.0-glibc\n'
    '            Image Pull Policy:  IfNotPresent\n'
    '            Name:               pytorch\n'
    '            Resources:\n'
    '              Limits:\n'
    '                Cpu:     1\n'
    '                Memory:  100Mi\n'
    '    Worker:\n'
    '      Replicas:        3\n'
    '      Restart Policy:  OnFailure\n'
    '      Template:\n'
    '        Spec:\n'
    '          Containers:\n'
    '            Command:\n'
    '              sh\n'
    '              -c\n'
    '              trap exit INT TERM; sleep 30s & wait\n'
    '            Image:              busybox:1.37.0-glibc\n'
    '            Image Pull Policy:  IfNotPresent\n'
    '            Name:               pytorch\n'
    '            Resources:\n'
    '              Limits:\n'
    '                Cpu:     1\n'
    '                Memory:  100Mi\n'
    '  Run Policy:\n'
    '    Backoff Limit:  3\n'
    '    Suspend:        false\n'
    'Status:\n'
    '  Conditions:\n'
    '    Last Transition Time:  2026-11-29T07:14:36Z\n'
    '    Last Update Time:      2026-11-29T07:14:36Z\n'
    '    Message:               PyTorchJob pytest is created.\n'
    '    Reason:                PyTorchJobCreated\n'
    '    Status:                True\n'
    '    Type:                  Created\n'
    '    Last Transition Time:  2026-11-29T07:16:12Z\n'
    '    Last Update Time:      2026-11-29T07:16:12Z\n'
    '    Message:               PyTorchJob default/pytest is running.\n'
    '    Reason:                PyTorchJobRunning\n'
    '    Status:                True\n'
    '    Type:                  Running\n'
    '  Replica Statuses:\n'
    '    Master:\n'
    '      Active:    1\n'
    '      Selector:  training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master\n'
    '    Worker:\n'
    '      Active:    3\n'
    '      Selector:  training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker\n'
    '  Start Time:    2026-11-29T07:14:36Z\n'
    'Events:\n'
    '  Type    Reason                   Age   From                   Message\n'
    '  ----    ------                   ----  ----                   -------\n'
    '  Normal  SuccessfulCreateService  82s   pytorchjob-controller  Created service: pytest-master-0\n'
    '  Normal  SuccessfulCreatePod      82s   pytorchjob-controller  Created pod: pytest-worker-0\n'
    '  Normal  PyTorchJobRunning        75s   pytorchjob-controller  PyTorchJob pytest is running.\n')


def test_describe_pytorchjob_matches_kubectl_output_18():
    assert describe(JOB, {"events": JOB_EVENTS}, NOW) == GOLDEN_18


# --------------------------------------------------------------------------
# Other branches
# --------------------------------------------------------------------------

def norm(text: str) -> list[str]:
    """Lines with runs of spaces collapsed: for checks where alignment is not the point."""
    return [" ".join(line.split()) for line in text.split("\n")]


def test_terminating_pod_without_status_details():
    pod = {"kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "deletionGracePeriodSeconds": 30,
                        "deletionTimestamp": "2026-11-29T07:16:54Z"},
           "spec": {"containers": [{"name": "main", "image": "python:3.11"}]},
           "status": {"phase": "Pending"}}
    a = 27  # widest label of the first block: "Termination Grace Period:" + 2
    b = 18  # "    Environment:" + 2, shared with Volumes .. Events (one column block)
    assert describe(pod, {"events": []}, NOW) == (
        f"{'Name:':<{a}}p\n"
        f"{'Namespace:':<{a}}default\n"
        f"{'Node:':<{a}}<none>\n"
        f"{'Labels:':<{a}}<none>\n"
        f"{'Annotations:':<{a}}<none>\n"
        f"{'Status:':<{a}}Terminating (lasts <invalid>)\n"
        f"{'Termination Grace Period:':<{a}}30s\n"
        f"{'IP:':<{a}}\n"
        f"{'IPs:':<{a}}<none>\n"
        "Containers:\n"
        "  main:\n"
        f"{'    Image:':<{b}}python:3.11\n"
        f"{'    Port:':<{b}}<none>\n"
        f"{'    Host Port:':<{b}}<none>\n"
        f"{'    Environment:':<{b}}<none>\n"
        f"{'    Mounts:':<{b}}<none>\n"
        f"{'Volumes:':<{b}}<none>\n"
        f"{'QoS Class:':<{b}}BestEffort\n"
        f"{'Node-Selectors:':<{b}}<none>\n"
        f"{'Tolerations:':<{b}}<none>\n"
        f"{'Events:':<{b}}<none>\n")


def test_container_details_env_sources_ports_probes_and_last_state():
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"nodeName": "n1", "containers": [{
               "name": "c", "image": "img", "args": ["--a", "line1\nline2"],
               "ports": [{"containerPort": 8080, "protocol": "TCP"},
                         {"containerPort": 9090, "hostPort": 19090, "protocol": "UDP"}],
               "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                       "fieldPath": "metadata.name"}}},
                       {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                                          "divisor": "1m"}}},
                       {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
                       {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                       {"name": "MULTI", "value": "a\nb"}],
               "resources": {"limits": {"cpu": "500m"}},
               "livenessProbe": {"exec": {"command": ["cat", "/tmp/ok"]}, "periodSeconds": 10,
                                 "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}}]},
           "status": {"phase": "Running", "hostIP": "127.0.0.1", "containerStatuses": [{
               "name": "c", "ready": False, "restartCount": 3, "containerID": "local://42",
               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
               "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                            "startedAt": "2026-11-29T07:15:00Z",
                                            "finishedAt": "2026-11-29T07:15:10Z"}}}]}}
    lines = norm(describe(pod, {"events": None}, NOW))
    for expected in ["Node: n1/127.0.0.1", "Container ID: local://42", "Ports: 8080/TCP, 9090/UDP",
                     "Host Ports: 0/TCP, 19090/UDP", "--a", "line1", "line2", "State: Waiting",
                     "Reason: CrashLoopBackOff", "Last State: Terminated", "Reason: Error", "Exit Code: 1",
                     "Started: Sun, 29 Nov 2026 07:15:00 +0000", "Finished: Sun, 29 Nov 2026 07:15:10 +0000",
                     "Ready: False", "Restart Count: 3", "Limits:", "cpu: 500m",
                     "Liveness: exec [cat /tmp/ok] delay=0s timeout=1s period=10s #success=1 #failure=3",
                     "POD_NAME: p (v1:metadata.name)", "CPU: 500 (limits.cpu)",
                     "MEM: node allocatable (limits.memory)",
                     "PW: <set to the key 'k' in secret 's'> Optional: false", "MULTI: a", "b",
                     "QoS Class: Burstable"]:
        assert expected in lines, expected
    assert not any(line.startswith("Events") for line in lines)  # events=None hides the section


def test_annotations_long_and_multiline_and_blocks_align_separately():
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "q", "annotations": {
             "a": "x" * 150, "b": "short", "c": "l1\nl2\n",
             "kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
         "spec": {"weight": 1}}
    pad = " " * 14
    assert describe(q, {}, NOW) == (
        "Name:         q\n"
        "Namespace:    \n"
        "Labels:       <none>\n"
        "Annotations:  a:\n"
        f"{pad}  {'x' * 138}...\n"
        f"{pad}b: short\n"
        f"{pad}c:\n"
        f"{pad}  l1\n"
        f"{pad}  l2\n"
        "API Version:  scheduling.volcano.sh/v1beta1\n"
        "Kind:         Queue\n"
        "Metadata:\n"
        "Spec:\n"
        "  Weight:  1\n"
        "Sharing:\n"
        "  Weight:       1\n"
        "  Reclaimable:  true\n"
        "  Guarantee:    <none>\n"
        "  Deserved:     <none>\n"
        "  Allocated:    <none>\n"
        "  Capability:   <none>\n"
        "  Reclaiming:   false\n"
        "Events:         <none>\n")


def podgroup(phase: str, message: str | None = None) -> dict:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pytest", "namespace": "default"},
          "spec": {"minMember": 4, "queue": "default"}, "status": {"phase": phase}}
    if message:
        pg["status"]["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                       "message": message}]
    return pg


WHY = "queue resource quota insufficient: insufficient cpu (need 8, allowed 4)"


def test_waiting_podgroup_says_why():
    text = describe(podgroup("Pending", WHY), {"events": []}, NOW)
    assert f"Waiting: PodGroup pytest is Pending: {WHY}" in norm(text)
    assert "Message: " + WHY in norm(text)  # the condition itself, as kubectl shows it
    assert waiting_reason(podgroup("Running", WHY)) == ""
    assert waiting_reason(podgroup("Inqueue")) == ""
    assert waiting_reason(None) == ""


def test_waiting_job_shows_its_podgroup_reason_until_it_runs():
    job = copy.deepcopy(JOB)
    job["status"]["conditions"] = job["status"]["conditions"][:1]  # Created only
    text = describe(job, {"events": [], "podgroup": podgroup("Inqueue", WHY)}, NOW)
    assert f"Waiting: PodGroup pytest is Inqueue: {WHY}" in norm(text)
    running = describe(JOB, {"events": [], "podgroup": podgroup("Inqueue", WHY)}, NOW)
    assert "Waiting:" not in running


def test_repeated_events_show_count_and_span():
    ev = {"type": "Warning", "reason": "BackOff", "message": "Back-off restarting failed container\n",
          "count": 5, "firstTimestamp": "2026-11-29T07:06:24Z", "lastTimestamp": "2026-11-29T07:15:24Z",
          "source": {"component": "phalanx-node", "host": "n1"}}
    text = describe({"kind": "TFJob", "metadata": {"name": "j"}}, {"events": [ev]}, NOW)
    assert text.endswith(
        "Events:\n"
        "  Type     Reason   Age                From          Message\n"
        "  ----     ------   ----               ----          -------\n"
        "  Warning  BackOff  60s (x5 over 10m)  phalanx-node  Back-off restarting failed container\n")


def test_describe_node_with_its_pods():
    node = {"kind": "Node", "metadata": {"name": "n1", "creationTimestamp": "2026-11-29T07:00:00Z",
                                         "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"},
                       "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"},
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "ok",
                                       "lastHeartbeatTime": "2026-11-29T07:16:00Z",
                                       "lastTransitionTime": "2026-11-29T07:00:00Z"}],
                       "nodeInfo": {"kubeletVersion": "phalanx-0.1.0", "architecture": "amd64"}}}

    def pod(name, containers, inits=(), phase="Running"):
        return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-11-29T07:15:24Z"},
                "spec": {"containers": list(containers), "initContainers": list(inits)},
                "status": {"phase": phase}}

    p1 = pod("p1", [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "100Mi"},
                                                "limits": {"cpu": "1", "memory": "100Mi", "nvidia.com/gpu": "1"}}}])
    p2 = pod("p2", [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}],
             inits=[{"name": "i", "resources": {"requests": {"cpu": "2"}}}])
    done = pod("done", [{"name": "c", "resources": {"requests": {"cpu": "8"}}}], phase="Succeeded")
    lines = norm(describe(node, {"events": [], "pods": [p1, p2, done]}, NOW))
    for expected in ["Roles: <none>", "CreationTimestamp: Sun, 29 Nov 2026 07:00:00 +0000",
                     "Taints: gpu=true:NoSchedule", "Unschedulable: false",
                     "Ready True Sun, 29 Nov 2026 07:16:00 +0000 Sun, 29 Nov 2026 07:00:00 +0000 Ready ok",
                     "InternalIP: 127.0.0.1", "nvidia.com/gpu: 2", "Kubelet Version: phalanx-0.1.0",
                     "Non-terminated Pods: (2 in total)",
                     "default p1 1 (6%) 1 (6%) 100Mi (0%) 100Mi (0%) 60s",
                     "default p2 2 (12%) 0 (0%) 0 (0%) 0 (0%) 60s",
                     "cpu 3 (18%) 1 (6%)", "memory 100Mi (0%) 100Mi (0%)", "nvidia.com/gpu 1 1"]:
        assert expected in lines, expected


def test_describe_service_with_endpoints_from_ready_pods():
    svc = {"kind": "Service", "metadata": {"name": "pytest-master-0", "namespace": "default",
                                           "annotations": {"phalanx.dev/address": "127.0.1.4"}},
           "spec": {"clusterIP": "None", "clusterIPs": ["None"], "selector": {"job": "pytest"},
                    "ports": [{"name": "pytorchjob-port", "port": 23456, "targetPort": 23456}]}}
    ready = {"status": {"podIP": "127.0.1.4", "conditions": [{"type": "Ready", "status": "True"}]}}
    not_ready = {"status": {"podIP": "127.0.1.9", "conditions": [{"type": "Ready", "status": "False"}]}}
    lines = norm(describe(svc, {"events": [], "pods": [ready, not_ready]}, NOW))
    for expected in ["Annotations: phalanx.dev/address: 127.0.1.4", "Selector: job=pytest", "Type: ClusterIP",
                     "IP Families: <none>", "IP: None", "IPs: None", "Port: pytorchjob-port 23456/TCP",
                     "TargetPort: 23456/TCP", "Endpoints: 127.0.1.4:23456", "Session Affinity: None"]:
        assert expected in lines, expected
    many = norm(describe(svc, {"endpoints": [f"127.0.1.{i}:1" for i in range(5)]}, NOW))
    assert "Endpoints: 127.0.1.0:1,127.0.1.1:1,127.0.1.2:1 + 2 more..." in many


def test_smart_labels_as_kubectl():
    assert camelcase_split("PDFLoader") == ["PDF", "Loader"]
    assert camelcase_split("podIPs") == ["pod", "I", "Ps"]
    for field, label in [("pytorchReplicaSpecs", "Pytorch Replica Specs"), ("uid", "UID"),
                         ("apiVersion", "API Version"), ("minMember", "Min Member"), ("Master", "Master"),
                         ("HTTPServer", "HTTP Server"), ("nvidia.com/gpu", "nvidia.com/gpu"),
                         ("v1beta1", "v1beta1"), ("ttlSecondsAfterFinished", "Ttl Seconds After Finished"),
                         ("resourceVersion", "Resource Version")]:
        assert smart_label(field) == label


def test_rfc1123z_uses_the_zone_of_now_and_go_zero_time():
    plus1 = NOW.astimezone(timezone(timedelta(hours=1)))
    assert rfc1123z("2026-11-29T07:14:40Z", plus1) == "Sun, 29 Nov 2026 08:14:40 +0100"
    assert rfc1123z(None, NOW) == "Mon, 01 Jan 0001 00:00:00 +0000"


def test_quantities():
    assert quantity_value("100Mi") == 104857600
    assert quantity_value("1.5") == quantity_value("1500m")
    assert quantity_value("2e3") == 2000
    assert quantity_value(4) == 4
    assert quantity_value("lots") is None
    assert quantity_value(True) is None
    assert canonical_quantity(quantity_value("1.1")) == "1100m"
    assert canonical_quantity(quantity_value("200Mi"), BINARY_SI) == "200Mi"
    assert canonical_quantity(quantity_value("1Gi") * 3, BINARY_SI) == "3Gi"
    assert canonical_quantity(quantity_value("3")) == "3"
    assert canonical_quantity(quantity_value("1000")) == "1k"
    assert canonical_quantity(quantity_value("0")) == "0"


def test_qos_class_computed_when_status_lacks_it():
    def pod(resources):
        return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                                                                                  "resources": resources}]}}
    same = {"cpu": "1", "memory": "1Gi"}
    assert "QoS Class: Guaranteed" in norm(describe(pod({"limits": same, "requests": same}), {}, NOW))
    assert "QoS Class: Burstable" in norm(describe(pod({"requests": {"cpu": "1"}}), {}, NOW))
    assert "QoS Class: BestEffort" in norm(describe(pod({}), {}, NOW))


def test_describe_never_crashes_on_odd_objects():
    for obj in [{"kind": "Pod", "spec": "x", "status": [1]}, {"kind": "PodGroup", "metadata": None},
                {"kind": "Node"}, {"kind": "Service", "spec": {"ports": ["x", {"name": "p"}]}},
                {"kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Active"}}, {}]:
        assert isinstance(describe(obj, {"events": [{"bad": True}, "junk"]}, NOW), str)
