"""Benchmarks: `make bench` runs them and appends the results to docs/benchmarks.md."""
