"""Scaling-law fitting and compute allocation."""
