"""Layer 8 (top): every command; the only place that parses command-line arguments."""

from benchbench.cli.main import main

__all__ = ["main"]
