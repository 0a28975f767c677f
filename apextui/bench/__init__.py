"""What the measurement scripts in benchmarks/ share, in the installed package so that they import it like any
other code (no `sys.path` edits, no importing each other): the bare loop (`bare`), the statistics and clock
wrapper of the overhead measurements (`measure`), a headless run in a fresh process (`headless`).

Not used by apextui itself."""
