"""The audit frame: one validated structure keyed by question ID.

Two tables, validated on construction:

* ``questions``: one row per question. Row ``i`` *is* question code ``i``. Columns
  ``question_id`` (str), ``question``, ``options`` (list of option texts; letters implied by
  position), ``answer`` (gold letter for ``mc``; gold value otherwise), ``answer_type``
  (``mc``, ``yesno``, ``numeric``, ``free``), ``category``, ``l2_category``, ``group_id``,
  ``hint``; derived ``n_options`` (int16) and ``gold_index`` (int16, -1 when not ``mc``).
* ``runs``: long format, one row per (question, model, arm). Stored compactly:
  ``q`` (int32 question code), ``m`` (int16 model code), ``arm`` (int8: 0 full, 1 blind),
  ``prediction`` and ``answer`` (Arrow strings, null when absent), ``hit`` and ``hit_exact``
  (int8: 1 correct, 0 wrong, -1 unknown).

Integer codes keep 50 models x 1,000,000 questions well inside a few GB. Detectors read dense
``(n_questions, n_models)`` matrices from :meth:`AuditFrame.correctness` and
:meth:`AuditFrame.answer_codes`; they never touch strings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..schema import ARMS, MISSING, QUESTION_COLUMNS, check_correctness_field
from .validate import validate_questions, validate_runs

#: serialises filling :attr:`AuditFrame.cache` when detectors run on several threads (re-entrant: one
#: cached value may be computed from another); reads of a filled entry take no lock
_CACHE_LOCK = threading.RLock()
DENSE = "dense"  # first element of the cache keys of the dense (Q, M) run matrices


def category_codes_of(column: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes and sorted labels of a question column (missing -> "(none)")."""
    col = column.astype(object).where(column.notna(), "(none)")
    codes, uniques = pd.factorize(col.astype(str), sort=True)
    return codes.astype(np.int32), [str(u) for u in uniques]


def inverse_order(order: np.ndarray) -> np.ndarray:
    """The inverse of a permutation: ``inverse_order(order)[order[i]] == i`` (this frame's question code -> its
    position in the canonical order of :meth:`AuditFrame.canonical`)."""
    inv = np.empty(len(order), dtype=np.int64)
    inv[order] = np.arange(len(order))
    return inv


def id_order(question_id: pd.Series) -> np.ndarray:
    """The canonical order of question IDs (positions, ``np.arange`` when they are in it already), a function of the
    set of IDs alone: integers in numeric order ("2" before "10"; negative ones too); IDs that are one common prefix
    and a number ("q0", "q1", ..., "q999999") by that number, then by text (leading zeros: "q07" beside "q7");
    any other IDs by text. (Whether every ID fits a form is decided over all of them, never from the first alone.)"""
    ids = question_id.astype(str)
    n = len(ids)
    if n == 0:
        return np.arange(0)
    first = ids.iloc[0]
    num = None
    if first[:1] in tuple("+-0123456789"):
        as_int = pd.to_numeric(ids, errors="coerce")
        if as_int.notna().all() and (as_int == as_int.round()).all() and \
                (ids == as_int.astype(np.int64).astype(str)).all():
            num = as_int.to_numpy(dtype=np.int64)
    if num is None:
        import re

        head = re.match(r"^(\D*)\d{1,18}$", first)
        if head is not None:
            prefix = head.group(1)
            if ids.str.fullmatch(re.escape(prefix) + r"\d{1,18}").all():
                num = ids.str.slice(len(prefix)).astype(np.int64).to_numpy()
    if num is not None:
        if n < 2 or (np.diff(num) > 0).all():
            return np.arange(n)
        order = np.argsort(num, kind="stable")
        if (np.diff(num[order]) == 0).any():  # equal numbers ("q07", "q7"): by number, then by text
            order = np.lexsort((ids.to_numpy(dtype=object), num))
        return order
    return np.arange(n) if ids.is_monotonic_increasing else np.argsort(ids.to_numpy(dtype=object), kind="stable")


@dataclass
class AuditFrame:
    """Validated questions + runs. Build it with :meth:`from_tables` (never directly)."""

    questions: pd.DataFrame
    runs: pd.DataFrame
    models: tuple[str, ...]
    sources: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    #: arrays derived from the tables (dense matrices, answer codes), computed once; never copied
    #: to derived frames and never written anywhere
    cache: dict = field(default_factory=dict, repr=False, compare=False)

    def drop_dense(self) -> None:
        """Drop the cached dense (Q, M) run matrices (the detectors' working copies; the report does not
        read them, and they are recomputed equal if asked for again). Every other cache entry stays."""
        for key in [k for k in self.cache if isinstance(k, tuple) and k and k[0] == DENSE]:
            self.cache.pop(key, None)
        canon = self.cache.get("canonical")
        if canon is not None and canon[0] is not self:  # the detectors' working copies live on the canonical frame
            canon[0].drop_dense()

    def cached(self, key, compute: Callable[[], object]):
        """``cache[key]``, computed once by ``compute()`` if absent (thread-safe: detectors sharing a frame
        on several threads compute each derived array once and never see a half-filled entry)."""
        value = self.cache.get(key)
        if value is None:
            with _CACHE_LOCK:
                value = self.cache.get(key)
                if value is None:
                    value = compute()
                    self.cache[key] = value
        return value

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(
        cls,
        questions: pd.DataFrame,
        runs: pd.DataFrame | None = None,
        *,
        questions_source: str = "<questions>",
        runs_source: str = "<runs>",
        sources: list[dict] | None = None,
        meta: dict | None = None,
        compute_exact: bool = True,
        drop_empty_runs: bool = True,
    ) -> AuditFrame:
        """Validate and encode. ``runs`` may carry ``source_file`` / ``source_row`` columns
        (set by the readers) so that errors name the original file and row. ``drop_empty_runs``: leave out (and
        name in ``meta``) the runs with nothing on any row (:func:`~audit_hub.frame.validate.empty_runs`); False
        keeps them, for callers whose contract counts a missing answer wrong (the ``evaluate`` modules)."""
        q = validate_questions(questions, questions_source)
        if runs is None:
            runs = pd.DataFrame({c: pd.Series([], dtype=object) for c in ("question_id", "model", "arm")})
        r, models = validate_runs(runs, q, runs_source, compute_exact=compute_exact, drop_empty=drop_empty_runs)
        answer_dict = r.attrs.pop("_answer_dict", None)
        cache = {"answer_dict": answer_dict} if answer_dict is not None else {}
        parsed = r.attrs.pop("_answer_codes", None)
        if parsed is not None:  # the parser's codes, kept as they are
            cache.update(answer_space=parsed, answer_codes=parsed.codes, gold_codes=parsed.gold)
        meta = dict(meta or {})
        gone = r.attrs.pop("_empty_runs", None)
        if gone:  # runs with no prediction, answer or correctness at all (validate.empty_runs): left out, said
            meta["empty_runs"] = gone
            meta["input_defects"] = {**(meta.get("input_defects") or {}), "empty_runs": len(gone)}
        # where hit_exact came from: the parser, on every row's prediction, or the run files' own column
        meta.setdefault("hit_exact_source", "parser" if parsed is not None else "input")
        return cls(questions=q, runs=r, models=tuple(models), sources=list(sources or []), meta=meta,
                   cache=cache)

    # ------------------------------------------------------------------ basic facts
    @property
    def n_questions(self) -> int:
        return len(self.questions)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def question_ids(self) -> np.ndarray:
        return self.questions["question_id"].to_numpy(dtype=object)

    def question_id_column(self) -> pd.api.extensions.ExtensionArray | np.ndarray:
        """The question IDs as the questions table stores them (zero-copy), for building per-question
        tables: converting :attr:`question_ids` (objects) back to strings costs ~0.2 s per 1e6 rows."""
        return self.questions["question_id"].array

    def arm_code(self, arm: str) -> int:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
        return ARMS.index(arm)

    def has_arm(self, arm: str) -> bool:
        return len(self.models_in(arm)) > 0

    def models_in(self, arm: str) -> list[str]:
        """Model names with at least one row in ``arm``, in model-code order."""
        key = ("models_in", arm)
        if key not in self.cache:
            with _CACHE_LOCK:
                if key not in self.cache:
                    self._fill_models_in()
        return list(self.cache[key])

    def _fill_models_in(self) -> None:
        a, m = self.runs["arm"].to_numpy(), self.runs["m"].to_numpy()
        M = len(self.models)
        counts = np.zeros(len(ARMS) * M, np.int64)
        step = 1 << 22
        for lo in range(0, len(a), step):  # both arms in one chunked pass
            counts += np.bincount(a[lo:lo + step].astype(np.int32) * M + m[lo:lo + step],
                                  minlength=len(ARMS) * M)
        for i, name in enumerate(ARMS):
            self.cache[("models_in", name)] = [self.models[j] for j in np.flatnonzero(counts[i * M:(i + 1) * M])]
            self.cache[("rows_in", name)] = int(counts[i * M:(i + 1) * M].sum())

    def models_per_item(self, arm: str) -> np.ndarray:
        """(Q,) how many of the models of ``arm`` have a run row on each item (read-only, cached): every model of
        the arm on every item unless a run stopped early or covered a subset. No pass over the runs when the arm's
        row count says every model ran every item (rows are unique per question, model and arm)."""
        code = self.arm_code(arm)
        M = len(self.models_in(arm))

        def compute():
            Q = self.n_questions
            if self.cache.get(("rows_in", arm)) == Q * M:
                out = np.full(Q, M, np.int64)
            else:
                a, q = self.runs["arm"].to_numpy(), self.runs["q"].to_numpy()
                out = np.zeros(Q, np.int64)
                step = 1 << 22
                for lo in range(0, len(a), step):
                    out += np.bincount(q[lo:lo + step][a[lo:lo + step] == code], minlength=Q)
            out.setflags(write=False)
            return out

        return self.cached(("models_per_item", arm), compute)

    def paired_models(self) -> list[str]:
        """Models present in both arms (the zero-gain audit pairs by model name)."""
        blind = set(self.models_in("blind"))
        return [m for m in self.models_in("full") if m in blind]

    def known_counts(self, field: str) -> np.ndarray:
        """(len(ARMS), n_models) number of run rows with a known (0/1) value in ``field`` (from
        :meth:`_run_counts`)."""
        check_correctness_field(field)

        def compute():
            cnt = self._run_counts()
            out = (cnt[:, 1:].sum(axis=(1, 2, 3)) if field == "hit" else cnt[:, :, 1:].sum(axis=(1, 2, 3)))
            out = out.reshape(len(ARMS), len(self.models))
            out.setflags(write=False)
            return out

        return self.cached(("known_counts", field), compute)

    def _run_counts(self) -> np.ndarray:
        """(len(ARMS) * n_models, 3, 3, 2) run rows per (arm, model), judged value + 1, exact-match value + 1
        and unparsed answer: one pass over the runs, computed once (the accuracy table and the known counts)."""
        def compute():
            r = self.runs
            M = len(self.models)
            size = len(ARMS) * M
            arm, mod = r["arm"].to_numpy(), r["m"].to_numpy()
            h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
            unp = r["answer"].isna().to_numpy() if len(r) else np.zeros(0, bool)
            cnt = np.zeros(size * 18, np.int64)
            step = 1 << 22
            for lo in range(0, len(r), step):
                sl = slice(lo, lo + step)
                key = arm[sl].astype(np.int32) * M + mod[sl]
                c = ((key * 3 + (h[sl] + 1)) * 3 + (e[sl] + 1)) * 2 + unp[sl]
                cnt += np.bincount(c, minlength=size * 18)
            cnt = cnt.reshape(size, 3, 3, 2)
            cnt.setflags(write=False)
            return cnt

        return self.cached(("run_counts",), compute)

    def paired_counts(self, arm_a: str, arm_b: str, field: str, models: Sequence[str] | None = None) -> np.ndarray:
        """(len(models), 4) counts (n11, n10, n01, n00) of each model's items known in ``field`` in both arms:
        right in both, right only in ``arm_a``, right only in ``arm_b``, wrong in both (from
        :meth:`_paired_cells`; rows follow ``models``, default all models in code order)."""
        check_correctness_field(field)
        cells = self._paired_cells(arm_a, arm_b)            # (M, 10, 9): arm_a's value pair (9: no run), arm_b's
        va = np.arange(10) // 3 - 1 if field == "hit" else np.arange(10) % 3 - 1
        va[9] = MISSING
        vb = (np.arange(9) // 3 - 1) if field == "hit" else (np.arange(9) % 3 - 1)
        out = np.zeros((len(self.models), 4), np.int64)
        for k, (x, y) in enumerate(((1, 1), (1, 0), (0, 1), (0, 0))):
            out[:, k] = cells[:, va == x][:, :, vb == y].sum(axis=(1, 2))
        return out if models is None else out[self._model_index(models)]

    def _paired_cells(self, arm_a: str, arm_b: str) -> np.ndarray:
        """(n_models, 10, 9) run rows of ``arm_b`` per model by the (judged, exact-match) value pair of the same
        (question, model) in ``arm_a`` (``3 * (hit + 1) + hit_exact + 1``; 9: no ``arm_a`` run) and in ``arm_b``:
        one scatter of ``arm_a``'s pairs and one gather at ``arm_b``'s rows; computed once per pair of arms."""
        def compute():
            M, Q = len(self.models), self.n_questions
            cells = np.zeros(M * 90, np.int64)
            if not (self.has_arm(arm_a) and self.has_arm(arm_b)):
                return cells.reshape(M, 10, 9)
            r = self.runs
            a, qc, mc = r["arm"].to_numpy(), r["q"].to_numpy(), r["m"].to_numpy()
            h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()

            def pair(sl, sel):  # the (judged, exact) value pair of the selected rows of one chunk, 0..8
                return (h[sl][sel].astype(np.int8) + 1) * 3 + (e[sl][sel] + 1)

            ca, cb = self.arm_code(arm_a), self.arm_code(arm_b)
            grid = np.full(M * Q, 9, np.int8)
            step = 1 << 22
            for lo in range(0, len(a), step):
                sl = slice(lo, lo + step)
                sel = a[sl] == ca
                if sel.any():
                    grid[mc[sl][sel].astype(np.int64) * Q + qc[sl][sel]] = pair(sl, sel)
            for lo in range(0, len(a), step):
                sl = slice(lo, lo + step)
                sel = a[sl] == cb
                if not sel.any():
                    continue
                m_b = mc[sl][sel].astype(np.int64)
                g = grid[m_b * Q + qc[sl][sel]]
                cells += np.bincount((m_b * 10 + g) * 9 + pair(sl, sel), minlength=M * 90)
            out = cells.reshape(M, 10, 9)
            out.setflags(write=False)
            return out

        return self.cached(("paired_cells", arm_a, arm_b), compute)

    def has_judged(self, arm: str = "full") -> bool:
        return bool((self.correctness(arm, "hit") >= 0).any())

    @property
    def gold_index(self) -> np.ndarray:
        return self.questions["gold_index"].to_numpy()

    @property
    def n_options(self) -> np.ndarray:
        return self.questions["n_options"].to_numpy()

    @property
    def answer_type(self) -> np.ndarray:
        """(Q,) read-only object array of each question's answer type (``mc``, ``yesno``, ...); computed once."""
        def compute():
            out = self.questions["answer_type"].to_numpy(dtype=object)
            out.setflags(write=False)
            return out

        return self.cached(("answer_type",), compute)

    def category_codes(self, column: str = "category") -> tuple[np.ndarray, list[str]]:
        """Integer codes (Q,) and their labels for a question column (missing -> "(none)"); computed once
        per column (the codes are read-only)."""
        def compute():
            codes, labels = category_codes_of(self.questions[column])
            codes.setflags(write=False)
            return codes, labels

        codes, labels = self.cached(("category_codes", column), compute)
        return codes, list(labels)

    def in_categories(self, labels, column: str = "category") -> np.ndarray:
        """(Q,) bool: the questions whose ``column`` label (as :meth:`category_codes` names it) is in ``labels``."""
        codes, names = self.category_codes(column)
        keep = np.isin(np.asarray(names, dtype=object), list(labels))
        return keep[codes] if len(names) else np.zeros(self.n_questions, bool)

    # ------------------------------------------------------------------ dense matrices
    def _model_index(self, models: Sequence[str] | None) -> np.ndarray:
        if models is None:
            return np.arange(len(self.models))
        lookup = {m: i for i, m in enumerate(self.models)}
        missing = [m for m in models if m not in lookup]
        if missing:
            raise KeyError(f"models not in the frame: {missing}")
        return np.array([lookup[m] for m in models], dtype=np.int64)

    def _fill_dense(self, arm: str, values: np.ndarray, dtype) -> np.ndarray:
        code = self.arm_code(arm)
        a = self.runs["arm"].to_numpy()
        qc_all, mc_all = self.runs["q"].to_numpy(), self.runs["m"].to_numpy()
        M, Q = len(self.models), self.n_questions
        # filled transposed, (M, Q): runs usually come model by model, so the scatter walks memory
        # in order; one blocked transpose then gives the C-ordered (Q, M) matrix
        out_t = np.full((M, Q), MISSING, dtype=dtype)
        flat = out_t.reshape(-1)
        step = 1 << 22
        for lo in range(0, len(a), step):
            sel = a[lo:lo + step] == code
            if sel.all():
                qc, mc, vals = qc_all[lo:lo + step], mc_all[lo:lo + step], values[lo:lo + step]
            elif sel.any():
                qc, mc, vals = qc_all[lo:lo + step][sel], mc_all[lo:lo + step][sel], values[lo:lo + step][sel]
            else:
                continue
            flat[mc.astype(np.int64) * Q + qc] = vals
        out_full = np.ascontiguousarray(out_t.T)
        out_full.setflags(write=False)
        return out_full

    def _dense(self, arm: str, values: np.ndarray, dtype, models: Sequence[str] | None,
               cache_key: str | None = None) -> np.ndarray:
        """Dense (Q, M) matrix of one run column; cached per (column, arm). Callers get a copy-free
        read-only view for all models, or a fresh array for a model subset."""
        if cache_key:
            out_full = self.cached((DENSE, cache_key, arm), lambda: self._fill_dense(arm, values, dtype))
        else:
            out_full = self._fill_dense(arm, values, dtype)
        if models is None:
            return out_full
        idx = self._model_index(models)
        if len(idx) == out_full.shape[1] and (idx == np.arange(len(idx))).all():
            return out_full  # all models in code order: the cached read-only matrix, no copy
        return out_full[:, idx]

    def correctness(self, arm: str = "full", field: str = "hit",
                    models: Sequence[str] | None = None) -> np.ndarray:
        """(n_questions, n_models) int8 matrix: 1 correct, 0 wrong, -1 unknown/missing.

        ``field`` is ``hit`` (judged by the harness) or ``hit_exact`` (our exact-match parser).
        Columns follow ``models`` (default: all models of the frame, in code order).
        """
        check_correctness_field(field)
        return self._dense(arm, self.runs[field].to_numpy(), np.int8, models, cache_key=field)

    def answer_codes(self, arm: str = "full", models: Sequence[str] | None = None) -> np.ndarray:
        """(n_questions, n_models) int32 matrix of chosen-answer codes, -1 unparseable/missing.

        For ``mc`` items the code is the option index (A=0). For other items it is a code that is
        equal exactly when the normalised extracted answers are equal (yes=0, no=1 for yes/no);
        compare against :meth:`gold_codes`.
        """
        return self._dense(arm, self.answer_code_vector(), np.int32, models, cache_key="answer_codes")

    def gold_codes(self) -> np.ndarray:
        """(n_questions,) gold answer in the code space of :meth:`answer_codes`."""
        self.answer_code_vector()
        return self.cache["gold_codes"]

    def answer_value_texts(self) -> tuple[int, tuple[str, ...]] | None:
        """``(kmax, values)``: codes below ``kmax`` are option indices (and yes / no), code ``kmax + i`` is the
        canonical value ``values[i]``; None where the values are not recoverable from the codes. For an order of
        codes that does not depend on the order rows came in (codes are numbered by first appearance)."""
        self.answer_code_vector()
        space = self.cache.get("answer_space")
        if space is None or space.values is None:
            return None
        return int(space.kmax), tuple(space.values)

    def answer_code_vector(self) -> np.ndarray:
        """(n_runs,) answer code of each run row (the long form of :meth:`answer_codes`).

        Parsed answers arrive with their codes (:mod:`audit_hub.answers.codes`); a frame derived from a
        parsed frame renumbers the parent's codes; answers given as text are encoded once, here."""
        cached = self.cache.get("answer_codes")
        if cached is not None:
            return cached
        with _CACHE_LOCK:
            return self._fill_answer_codes()

    def _fill_answer_codes(self) -> np.ndarray:
        cached = self.cache.get("answer_codes")
        if cached is not None:
            return cached
        from ..answers import codes as answer_codes

        parent = self.cache.pop("answer_parent", None)
        if parent is not None:
            space, keep = parent
            space = answer_codes.renumber(space, self.questions, self.runs["q"].to_numpy(), space.codes[keep])
        else:
            ad = self.cache.pop("answer_dict", None)
            if ad is not None and ad[2] is not self.runs["answer"].array._pa_array:  # noqa: SLF001 (answers changed)
                ad = None
            space = answer_codes.encode_text(self.questions, self.runs, answer_dict=None if ad is None else ad[:2])
        self.cache.update(answer_space=space, answer_codes=space.codes, gold_codes=space.gold)
        return space.codes

    def _derived_cache(self, keep: np.ndarray) -> dict:
        """Cache of a frame derived from this one keeping the run rows ``keep`` (bool): the parsed
        answers' code space, renumbered on first use instead of re-reading the answer texts."""
        space = self.cache.get("answer_space")
        if space is None or space.values is None:
            return {}
        return {"answer_parent": (space, keep)}

    # ------------------------------------------------------------------ export
    def runs_table(self) -> pd.DataFrame:
        """The runs in their public long format (string IDs, nullable booleans)."""
        r = self.runs
        out = pd.DataFrame({
            "question_id": pd.Categorical.from_codes(r["q"].to_numpy(), categories=self.questions["question_id"].astype(str)),
            "model": pd.Categorical.from_codes(r["m"].to_numpy(), categories=list(self.models)),
            "arm": pd.Categorical.from_codes(r["arm"].to_numpy(), categories=list(ARMS)),
            "prediction": r["prediction"],
            "answer": r["answer"],
            "hit": _int8_to_bool(r["hit"].to_numpy()),
            "hit_exact": _int8_to_bool(r["hit_exact"].to_numpy()),
        })
        for c in ("question_id", "model", "arm"):
            out[c] = out[c].astype(str)
        return out

    def questions_table(self) -> pd.DataFrame:
        """The questions in their public format (without derived columns; with ``gold_alternatives``, the accepted
        answers of golds that list several, when any does)."""
        extra = ["gold_alternatives"] if "gold_alternatives" in self.questions.columns else []
        return self.questions[list(QUESTION_COLUMNS) + extra].copy()

    def accuracy_table(self) -> pd.DataFrame:
        """Per model and arm: n items, judged and exact-match accuracy, unparseable share."""
        M = len(self.models)
        A = len(ARMS)
        cnt = self._run_counts()  # 18 cells per (arm, model): hit, hit_exact, unparsed
        n_items = cnt.sum(axis=(1, 2, 3))
        h_known, h_right = cnt[:, 1:].sum(axis=(1, 2, 3)), cnt[:, 2].sum(axis=(1, 2))
        e_known, e_right = cnt[:, :, 1:].sum(axis=(1, 2, 3)), cnt[:, :, 2].sum(axis=(1, 2))
        unparsed = cnt[..., 1].sum(axis=(1, 2))
        rows = []
        for mm in range(M):  # groupby order: model code, then arm
            for aa in range(A):
                k = aa * M + mm
                if n_items[k] == 0:
                    continue
                rows.append({
                    "model": self.models[mm], "arm": ARMS[aa], "n_items": int(n_items[k]),
                    "n_judged": int(h_known[k]),
                    "accuracy_judged": float(h_right[k] / max(h_known[k], 1)) if h_known[k] else np.nan,
                    "accuracy_exact": float(e_right[k] / max(e_known[k], 1)) if e_known[k] else np.nan,
                    "unparseable_share": float(unparsed[k] / n_items[k]),
                })
        return pd.DataFrame(rows)


    # ------------------------------------------------------------------ derived frames
    def subset_questions(self, keep: np.ndarray | Iterable[str]) -> AuditFrame:
        """A new frame restricted to some questions (bool mask over codes, or question IDs)."""
        keep = np.asarray(list(keep) if not isinstance(keep, np.ndarray) else keep)
        if keep.dtype != bool:
            keep = self.questions["question_id"].isin(set(map(str, keep))).to_numpy()
        new_code = np.full(self.n_questions, -1, dtype=np.int64)
        new_code[keep] = np.arange(int(keep.sum()))
        q = self.questions[keep].reset_index(drop=True)
        rq = new_code[self.runs["q"].to_numpy()]
        r = self.runs[rq >= 0].reset_index(drop=True)
        r["q"] = rq[rq >= 0].astype(np.int32)
        return AuditFrame(questions=q, runs=r, models=self.models, sources=self.sources,
                          meta=dict(self.meta), cache=self._derived_cache(rq >= 0))

    def canonical(self) -> tuple[AuditFrame, np.ndarray]:
        """This frame with its questions in ID order (:func:`id_order`: numeric for integer IDs and for one prefix and a
        number, else by text) and its models in name order, and ``order``: canonical question position -> this frame's question code. The
        seeded procedures (the calibration's null simulator, the label model's fits, checks and planted-error
        runs) run on it, so that their draws depend on the data and the seed only, not on the order the rows,
        files or models came in (the metamorphic review: shuffled rows moved a calibration verdict). The frame
        itself when it is already in that order (no copy); computed once."""
        def compute():
            order = id_order(self.questions["question_id"])
            names = sorted(self.models)
            same_q = bool((order == np.arange(len(order))).all())
            if same_q and names == list(self.models):
                return self, order
            rank = inverse_order(order)
            where = {m: i for i, m in enumerate(names)}
            mnew = np.array([where[m] for m in self.models], dtype=np.int64)
            r = self.runs.copy(deep=False)
            if not same_q:
                r["q"] = rank[r["q"].to_numpy()].astype(np.int32)
            r["m"] = mnew[r["m"].to_numpy()].astype(np.int16)
            q = self.questions if same_q else self.questions.iloc[order].reset_index(drop=True)
            cache = self._derived_cache(np.ones(len(r), dtype=bool))
            return AuditFrame(questions=q, runs=r, models=tuple(names), sources=self.sources, meta=dict(self.meta),
                              cache=cache), order

        return self.cached("canonical", compute)

    def without_models(self, drop: Iterable[str]) -> AuditFrame:
        drop = set(drop)
        keep_models = [m for m in self.models if m not in drop]
        remap = np.full(len(self.models), -1, dtype=np.int64)
        for new, m in enumerate(keep_models):
            remap[self.models.index(m)] = new
        rm = remap[self.runs["m"].to_numpy()]
        r = self.runs[rm >= 0].reset_index(drop=True)
        r["m"] = rm[rm >= 0].astype(np.int16)
        return AuditFrame(questions=self.questions, runs=r, models=tuple(keep_models),
                          sources=self.sources, meta=dict(self.meta), cache=self._derived_cache(rm >= 0))


def _int8_to_bool(a: np.ndarray) -> pd.Series:
    s = pd.Series(a == 1, dtype="boolean")
    s[a < 0] = pd.NA
    return s


# ---------------------------------------------------------------------- validation helpers


