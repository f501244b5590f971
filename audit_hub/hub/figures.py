"""The figure style and PNG writer every output shares (matplotlib's Agg backend, imported on first use).

Figures are files of an output folder, so they are written here: the same style, the same byte-stable
PNG (no software tag) for the audit report, TsT and curation.
"""

from __future__ import annotations

from pathlib import Path


def pyplot_agg():
    """``matplotlib.pyplot`` on the Agg backend with the report style."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import warnings

    import matplotlib.pyplot as plt

    # a character the font lacks (a CJK model name) draws as a box: no warning per glyph on the console, whose
    # text would carry the raw character (an ESC of a hostile name included)
    warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.spines.top": False,
                         "axes.spines.right": False, "figure.dpi": 110})
    return plt


def fig_label(s, limit: int = 40) -> str:
    """An input-derived string (model, category) as a figure label: one line, control characters removed,
    credentials scrubbed, truncated (:func:`audit_hub.escape.plain_text`), and ``$`` escaped, which matplotlib
    would otherwise read as the start of a formula."""
    from ..escape import plain_text

    return plain_text(s, limit).replace("$", r"\$")


def save_png(fig, path: Path) -> None:
    """Write ``fig`` to ``path`` (parents created) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight", facecolor="white", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
