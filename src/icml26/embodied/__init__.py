"""Embodied agents: world models and skill-routed policies."""
