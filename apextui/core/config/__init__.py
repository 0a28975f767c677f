"""The configuration vocabulary of every workload: the axes a training loop can change (`axes`), a point on them
(`point.Config`), what each value needs and whether this machine has it (`needs`), and the code that applies a
point (`snippet`). No torch at import time, and nothing of apextui's outside this package: what a value builds is
`workloads/apply.py`, whether a preset's point can run here `availability.py`."""
