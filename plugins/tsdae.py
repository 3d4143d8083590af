"""Placeholder: being implemented (registers nothing yet)."""
