"""Benchmarks and simulations, each a script (bench/README.md); load.py and otlp.py reuse
ingest.py's setup as `bench.ingest`."""
