"""Gradio widget of the distractor_similarity metric Space (huggingface.co/spaces/benchaudit/distractor_similarity)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/distractor_similarity")
launch_gradio_widget(module)
