"""A run's measurement: its step times' statistics (`stats`: `StepStats` keeps the times, `Stats` what they say), its
summary (`summary.Summary`: what the `end` line, a results row and the advice read, with its `timing`), the one
noise rule over timings (`compare`), and the marker a workload's step is handed to time its optimizer step
(`marker`).

No torch, no Textual, and nothing else of the engine: the runner, the workloads, the analysis, the advice and both
front ends read a run's timing from here, so it sits below them all. This package imports nothing itself.
"""
