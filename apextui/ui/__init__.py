"""The Textual terminal UI (a thin front end over apextui.core)."""
