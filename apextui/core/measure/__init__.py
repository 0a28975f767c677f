"""A run's measurement: its step times' statistics (`stats`: `StepStats` keeps the times, `Stats` what they say), its
summary (`summary.Summary`: what the `end` line, a results row and the advice read, with its `timing`) and the typed
records it holds (`details`: the correctness check, roofline, bottleneck, data-parallel ranks), the one noise rule
over timings (`compare`), and the marker a workload's step is handed to time its optimizer step (`marker`).

No torch, no Textual: the runner, the workloads, the analysis, the advice and both front ends read a run's timing
from here, so it sits below them all. Of the engine it imports only two leaves, for the records a summary holds:
`monitor.contention` (a run's contention record, counted there) and `config.calling` (how the correctness check
called the user's model). This package's own module imports nothing.
"""
