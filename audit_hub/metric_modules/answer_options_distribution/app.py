"""Gradio widget of the answer_options_distribution metric Space (huggingface.co/spaces/benchaudit/answer_options_distribution)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/answer_options_distribution")
launch_gradio_widget(module)
