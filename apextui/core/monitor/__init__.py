"""GPU telemetry while a run trains: NVML readings and the background sampler."""
