"""Two-line hooks for the trainers people use: `hf` (a `transformers.TrainerCallback`) and `lightning` (a Lightning
`Callback`), each on `apextui.watch` (docs/watch.md). Installed with `pip install apextui[hf]` / `apextui[lightning]`;
importing this package imports neither."""
