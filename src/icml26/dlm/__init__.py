"""Diffusion-LM decoding methods."""
