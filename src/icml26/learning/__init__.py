"""Losses, wrappers and training recipes."""
