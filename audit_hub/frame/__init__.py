"""The audit frame: one validated structure keyed by question ID, its validation and question metadata."""
