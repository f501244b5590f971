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
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.spines.top": False,
                         "axes.spines.right": False, "figure.dpi": 110})
    return plt


def save_png(fig, path: Path) -> None:
    """Write ``fig`` to ``path`` (parents created) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight", facecolor="white", metadata={"Software": None})
    import matplotlib.pyplot as plt

    plt.close(fig)
