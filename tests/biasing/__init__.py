"""Tests of the pure biasing library (issues 3 and 4)."""
