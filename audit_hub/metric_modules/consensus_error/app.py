"""Gradio widget of the consensus_error metric Space (huggingface.co/spaces/benchaudit/consensus_error)."""

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("benchaudit/consensus_error")
launch_gradio_widget(module)
