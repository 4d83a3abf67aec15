"""Benchmarks: `make bench` runs them and writes the results to a dated file under bench/results/."""
