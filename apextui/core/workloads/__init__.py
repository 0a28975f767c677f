"""The article's experiments as workloads, and the user's own model (`--model`), built from a preset.

Each workload is declared once in the registry (`spec.WORKLOADS`) and built by `builders.build`; this package's
own module imports nothing, so that importing the registry (presets, the TUI) stays cheap and loads no torch.
"""
