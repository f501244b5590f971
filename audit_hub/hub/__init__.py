"""Output folders in the Hugging Face Hub layout and publishing them: the one layer that writes outputs."""
