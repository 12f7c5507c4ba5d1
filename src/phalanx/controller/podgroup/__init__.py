"""The podgroup controller (Volcano's pg-controller): a PodGroup of one for every
served pod that names none. ``core.decide`` decides; ``controller.PodGroupController`` applies."""
