"""Langevin and diffusion samplers."""
