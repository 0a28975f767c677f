"""Configurations of the model workload: the axes a training loop can change (`axes`) and a point on them
(`point.Config`). No torch at import time."""
