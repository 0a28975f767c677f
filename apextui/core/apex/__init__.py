"""Apex: is it built, importable and working here (the doctor, its child probe, and the per-feature checks presets
rely on)."""
