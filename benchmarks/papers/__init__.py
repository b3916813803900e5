"""Benchmarks that reproduce papers' claims, a folder per paper."""
