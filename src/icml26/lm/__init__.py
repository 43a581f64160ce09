"""Autoregressive-LM inference and memory methods."""
