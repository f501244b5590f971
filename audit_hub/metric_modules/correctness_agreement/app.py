"""Gradio widget of the correctness_agreement metric Space (huggingface.co/spaces/benchaudit/correctness_agreement)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/correctness_agreement")
launch_gradio_widget(module)
