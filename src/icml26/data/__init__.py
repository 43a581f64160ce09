"""Data selection and synthetic-data methods."""
