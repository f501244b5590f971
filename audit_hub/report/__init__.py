"""The audit report: a Hugging Face dataset folder (card, configs, figures, summary, manifest).

Entry points: :func:`write_report` (the whole folder, atomically), :func:`build_questions_table`
and :func:`build_summary_table` (the ``questions`` and ``summary`` configs as DataFrames).
"""

from .tables import ACTION_RULES, ACTIONS, build_questions_table, build_runs_table, build_summary_table
from .writer import write_report

__all__ = ["ACTIONS", "ACTION_RULES", "build_questions_table", "build_runs_table", "build_summary_table",
           "write_report"]
