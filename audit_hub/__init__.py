"""benchaudit: audit VLM benchmarks from existing evaluation runs."""
__version__ = "0.1.0"
