"""Watching the user's own training: the hook (`hook.Watch`, `apextui.watch`), the stream it writes (`stream`), the
run folders and the index of live runs (`store`), reading a stream back (`reader`) and turning it into the
engine's snapshots (`replay`) and comparison rows (`rows`). docs/watch.md describes it."""
