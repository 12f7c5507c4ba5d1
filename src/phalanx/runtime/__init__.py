"""The controller runtime: informer, work queue, reconcile loop and event recorder.

Shared by the job controller, the garbage collector, the scheduler and the node agent (controller-runtime's role).
"""
