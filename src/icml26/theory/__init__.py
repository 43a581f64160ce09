"""Numerical theory: kernels, mean-field dynamics, bandits — solvers checked against simulation."""
