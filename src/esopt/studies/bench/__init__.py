"""Benchmarks: each prints RESULT name=value lines last and writes a JSON file."""
