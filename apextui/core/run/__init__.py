"""One training run: the runner (thread or worker process), its timing, statistics and the events it emits."""
