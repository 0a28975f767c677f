"""What the measurement scripts in benchmarks/ share: the bare loop (`bare`), the statistics and clock wrapper of
the overhead measurements (`measure`), a headless run in a fresh process (`fresh_process`).

A package beside the scripts, not in apextui: apextui itself never uses it. A script run as
`python benchmarks/NAME.py` has this folder on its path, so it imports `benchlib` with no `sys.path` edit; the
scripts never import each other."""
