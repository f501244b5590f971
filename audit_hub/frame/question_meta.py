"""Question metadata: the columns of a question table that are neither the audit's own fields nor
media, kept as text so they survive into the frame (HallusionBench's ``subcategory``,
``visual_input``, ``set_id``, ``figure_id``; any column ``--design-label`` may name).
"""

from __future__ import annotations

from collections.abc import Iterable

#: columns the audit reads itself (or never keeps): not metadata
_OWN = frozenset({
    "question_id", "index", "id", "qid", "doc_id", "question", "options", "choices", "candidates", "answer", "answer_type",
    "category", "l2_category", "l2-category", "L2-category", "group_id", "g_index", "hint", "source_row",
    "source_file", "prediction", "hit", "hit_exact", "log", "extracted", "score", "res", "model", "arm",
    "n_options", "gold_index", "gold", "target", "gold_alternatives",
})
_MEDIA = frozenset({"image", "images", "image_path", "image_base64", "decoded_image", "img", "video", "audio"})
#: at most this many metadata columns are kept (wide tables: the first ones in table order)
MAX_META_COLUMNS = 24


def metadata_columns(columns: Iterable[str]) -> list[str]:
    """Columns of a question table to keep as metadata, in table order."""
    out = []
    for c in columns:
        name = str(c)
        if name in _OWN or name.lower() in _MEDIA or (len(name) == 1 and name.isupper()):
            continue
        if name.startswith("_"):
            continue
        out.append(name)
    return out[:MAX_META_COLUMNS]


def as_text(values) -> list:
    """Cells as text: strings stay, lists/dicts become JSON (sorted keys), missing values None."""
    import json
    import math

    out = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append(None)
        elif isinstance(v, str):
            out.append(v)
        elif isinstance(v, (dict, list, tuple)):
            out.append(json.dumps(v, sort_keys=True, ensure_ascii=False, default=str))
        elif hasattr(v, "tolist"):
            out.append(json.dumps(v.tolist(), ensure_ascii=False, default=str) if getattr(v, "ndim", 0) else str(v))
        else:
            out.append(str(v))
    return out


__all__ = ["metadata_columns", "as_text", "MAX_META_COLUMNS"]
