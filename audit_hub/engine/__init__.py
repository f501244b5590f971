"""The audit engine: one run of every detector over a frame, calibration, the worker process and threads."""
