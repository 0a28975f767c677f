"""The engine behind both front ends (headless JSON and the TUI). Never imports Textual."""
