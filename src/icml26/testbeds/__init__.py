"""Shared data and tiny models used by several papers (trained artefacts are cached on disk)."""
