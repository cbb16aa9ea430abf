"""The load test (``python -m loadtest`` / ``captions loadtest``): N simulated browsers stream
speech in real time over protocol v1, ramped over steps, to measure how many live sessions one server holds
in real time and how it degrades past that (docs/loadtest.md)."""
