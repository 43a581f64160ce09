"""``python -m icml26`` = the ``icml26`` command."""

from .cli import app

if __name__ == "__main__":
    app(prog_name="icml26")
