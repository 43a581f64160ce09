"""Analysis of trained models (measurement tools that run on a user's own model)."""
