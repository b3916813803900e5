"""Scripts that measure opformer, run from the repository root as ``python -m benchmarks.PURPOSE.NAME``; their results are in ``benchmarks/results/`` (the same folders, named for the script)."""
