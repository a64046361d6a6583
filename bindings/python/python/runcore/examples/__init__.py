"""Runnable examples of Python hosts for runcore."""
