"""Gradio widget of the visual_dependency metric Space (huggingface.co/spaces/benchaudit/visual_dependency)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/visual_dependency")
launch_gradio_widget(module)
