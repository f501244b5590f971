"""Gradio widget of the fleiss_kappa_agreement metric Space (huggingface.co/spaces/benchaudit/fleiss_kappa_agreement)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/fleiss_kappa_agreement")
launch_gradio_widget(module)
