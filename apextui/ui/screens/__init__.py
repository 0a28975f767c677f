"""Modal screens: the full doctor report, loading saved results."""
