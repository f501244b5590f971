"""distractor_similarity (judge-free): options of one item that say the same thing.

Option texts are normalised once per *unique* text (:mod:`audit_hub.detectors.text_norm`: NFKC, casefold,
letter prefixes such as ``"A."``/``"(B)"`` stripped, light LaTeX clean-up, numbers rewritten exactly so
``"0.5" == ".50" == "1/2"``). Then, for every pair of options of an item:

* **exact** duplicate: equal normalised texts (numbers compared by value). Critical when one of the two
  is the gold option, high otherwise.
* **near** duplicate: normalised Levenshtein similarity >= 0.9 with both texts of 8+ characters, or
  rapidfuzz token-set ratio >= 90 with 2+ tokens each. Medium when the gold is involved, low otherwise.
  Not near duplicates: texts of 3 characters or fewer and texts that are numbers (compared exactly /
  numerically only); texts that differ only in their numbers (same *skeleton*, e.g. "4 cm" vs "5 cm");
  token-set matches where one token set is a strict subset of the other ("I and II" vs
  "I, II and III": token-set ratio is 100 for any subset, so it says nothing there), or where the token sets
  agree and only the tokens' counts or places differ ("6 × 6 × 6 × 6" vs "6 × 6 × 6"; "π cm²" vs "2π cm²",
  whose words agree through the exponent's 2);
  **contrastive** pairs are reported as contrastive (severity info), never duplicate: an antonym
  (left/right, above/below, increase/decrease, more/less, true/false, ...), a negation present in only
  one text, the same words in a different order ("40 black and 41 white ones" vs "40 white and 41 black
  ones": the similarity is order-aware), changed numbers (same skeleton, "4 cm" vs "5 cm"), or changed
  labels: texts that differ only in single letters or roman numerals ("Solution A" vs "Solution B",
  "Set I" vs "Set II": MathVista testmini 232 and 769 name two solutions this way).
* Options whose text is just their own letter (``["A", "B", "C", "D", "E"]`` in MATH-Vision: the real
  options are in the image) are *bare-letter* options. They are excluded from text comparison;
  ``n_bare_letter_option_items`` counts items whose options are all bare letters. Empty texts are
  excluded too.
* **Placeholder options** (:mod:`audit_hub.detectors.placeholders`: ``nan``, ``None``, ``null``, ``N/A``, empty,
  ...) are not options: they are never compared as duplicates of each other. A placeholder *gold* is
  critical (the item is unanswerable as released; suggested action "relabel"); placeholder
  *distractors* are high ("rewrite distractor"). ``n_placeholder_gold`` and
  ``n_placeholder_distractor_items`` count them.

Per question: ``score = 1 - max pair similarity`` (exact = 1; pairs excluded above count as 0).
Performance: pairs are built per number of options with numpy, deduplicated as (text, text) code pairs,
filtered cheaply (length ratio, skeleton) and only the rest is scored with rapidfuzz ``cpdist``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..errors import DetectorSkipped
from ..fmt import count, fmt_num, isnum, num_labels, str_labels
from ..frame.core import AuditFrame
from ..schema import LETTERS
from ..severity import LEVELS, severity_array
from ..stats.core import wilson_ci
from .accounting import item_accounting
from .base import DetectorResult, summary_rows

NAME = "distractor_similarity"


_ANTONYMS: tuple[tuple[str, str], ...] = (
    ("left", "right"), ("above", "below"), ("up", "down"), ("top", "bottom"), ("upper", "lower"),
    ("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"),
    ("increasing", "decreasing"), ("more", "less"), ("more", "fewer"), ("most", "least"),
    ("greater", "smaller"), ("greater", "less"), ("larger", "smaller"), ("bigger", "smaller"),
    ("largest", "smallest"), ("higher", "lower"), ("highest", "lowest"), ("true", "false"),
    ("yes", "no"), ("before", "after"), ("inside", "outside"), ("maximum", "minimum"), ("max", "min"),
    ("clockwise", "counterclockwise"), ("clockwise", "anticlockwise"), ("horizontal", "vertical"),
    ("positive", "negative"), ("even", "odd"), ("same", "different"), ("all", "none"),
    ("first", "last"), ("east", "west"), ("north", "south"), ("open", "closed"), ("on", "off"),
    ("in", "out"), ("front", "back"), ("front", "behind"), ("male", "female"), ("men", "women"),
    ("man", "woman"), ("boy", "girl"), ("correct", "incorrect"), ("equal", "unequal"),
    ("longer", "shorter"), ("taller", "shorter"), ("heavier", "lighter"), ("faster", "slower"),
    ("older", "younger"), ("wider", "narrower"), ("rises", "falls"), ("rise", "fall"),
    ("parallel", "perpendicular"), ("convex", "concave"), ("acute", "obtuse"), ("inner", "outer"),
    ("always", "never"), ("possible", "impossible"), ("enter", "exit"), ("start", "end"),
    ("win", "lose"), ("gain", "loss"), ("hot", "cold"), ("light", "dark"), ("black", "white"),
    ("day", "night"), ("input", "output"), ("push", "pull"), ("import", "export"),
)
_ANTONYM_SET = {(a, b) for a, b in _ANTONYMS} | {(b, a) for a, b in _ANTONYMS}
_NEGATIONS = {"not", "no", "never", "none", "cannot", "without", "neither", "nor", "nothing", "nobody"}
_NEG_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "non-")
_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)?|[a-z]+-[a-z]+|\d+(?:\.\d+)?")


def _is_contrastive(a: str, b: str) -> bool:
    """True when two texts differ by an antonym, a negation or a negating prefix."""
    ta, tb = set(_WORD_RE.findall(a)), set(_WORD_RE.findall(b))
    da, db = ta - tb, tb - ta
    if any((x, y) in _ANTONYM_SET for x in da for y in db):
        return True

    def neg(ts):
        return any(t in _NEGATIONS or t.endswith("n't") for t in ts)

    if neg(ta) != neg(tb):
        return True
    for x in da:
        for y in db:
            for p in _NEG_PREFIXES:
                if x == p + y or y == p + x:
                    return True
    return False


_LABEL_TOKENS = frozenset("abcdefghijklmnopqrstuvwxyz") | frozenset(
    ("ii", "iii", "iv", "vi", "vii", "viii", "ix", "xi", "xii"))


def _is_relabel(a: str, b: str) -> bool:
    """True when two texts differ only in labels: single letters or roman numerals that name different
    things ("Solution A" vs "Solution B", "Set I" vs "Set II", "x = 5" vs "y = 5")."""
    ta, tb = set(_WORD_RE.findall(a)), set(_WORD_RE.findall(b))
    da, db = ta - tb, tb - ta
    return bool(da) and bool(db) and all(t in _LABEL_TOKENS for t in da | db)


def _is_permutation(a: str, b: str) -> bool:
    """True when two texts have the same words in a different order ("40 black and 41 white ones" vs
    "40 white and 41 black ones"): swapped words make opposite options, which an order-blind token-set
    similarity scores 100."""
    wa, wb = _WORD_RE.findall(a), _WORD_RE.findall(b)
    return wa != wb and sorted(wa) == sorted(wb)


def _is_token_subset(a: str, b: str) -> bool:
    """True when a token-set ratio of 100 says nothing about the pair: one text's token set is a strict subset of
    the other's ("I and II" vs "I, II and III"), or the two texts have the same token set and differ only in how
    often or where the tokens stand ("6 × 6 × 6 × 6" vs "6 × 6 × 6", "↓ → → ↓" vs "→ ↓ → →": MATH-V 1992 and
    660, scored similarity 1). Tokens are checked both as words and as the whitespace tokens the ratio uses
    ("\\pi cm^2" vs "2 \\pi cm^2": the words {pi, cm, 2} agree, the tokens do not)."""
    for ta, tb in ((set(_WORD_RE.findall(a)), set(_WORD_RE.findall(b))), (set(a.split()), set(b.split()))):
        if ta != tb and (ta < tb or tb < ta):
            return True
    return set(a.split()) == set(b.split()) and a.split() != b.split()


def _unique_inverse(keys: np.ndarray, n_keys: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for int64 keys in ``[0, n_keys)``: through a dense
    presence table when ``n_keys`` is small next to the number of keys (O(n), no sort), else by sorting."""
    if n_keys is not None and n_keys <= max(4 * len(keys), 1 << 20):
        present = np.zeros(n_keys, bool)
        present[keys] = True
        ukeys = np.flatnonzero(present)
        rank = np.cumsum(present, dtype=np.int64) - 1
        return ukeys.astype(np.int64), rank[keys]
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    start = np.ones(len(sk), bool)
    start[1:] = sk[1:] != sk[:-1]
    grp = np.cumsum(start) - 1
    inv = np.empty(len(keys), np.int64)
    inv[order] = grp
    return sk[start], inv


def _flatten_options(q: pd.DataFrame):
    """Every option of every item as one flat Arrow array, each unique raw text normalised once.
    Returns the list offsets, each option's item and position, its raw-text code, the normalised texts
    (codes and values) and per normalised text its characters, tokens and whether it is a number."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .text_norm import normalise_many

    la = pa.array(q["options"], type=pa.list_(pa.string()))
    flat = pc.fill_null(pc.list_flatten(la), "")
    parent = pc.list_parent_indices(la).to_numpy().astype(np.int64)
    offsets = la.offsets.to_numpy().astype(np.int64)
    pos = np.arange(len(flat), dtype=np.int64) - offsets[parent]
    enc = pc.dictionary_encode(flat)
    raw_code = enc.indices.to_numpy().astype(np.int64)
    nt = normalise_many(enc.dictionary)
    norm_code_u, norm_texts = nt.codes()
    n_norm = len(norm_texts)
    chars = np.zeros(n_norm, np.int32)
    chars[norm_code_u] = nt.n_chars
    toks = np.zeros(n_norm, np.int32)
    toks[norm_code_u] = nt.n_tokens
    isnum = np.zeros(n_norm, bool)
    isnum[norm_code_u] = nt.is_number
    return offsets, parent, pos, raw_code, nt, norm_code_u, norm_texts, chars, toks, isnum


def _option_pairs(K: np.ndarray, compared: np.ndarray, offsets: np.ndarray, usable: np.ndarray):
    """All option pairs (i < j) of the compared items, grouped by number of options (int32 / int8 index
    arrays: 1e6 items give ~7e6 pairs), without unusable options: item, positions, flat indices."""
    # (int32 / int8 index arrays: 1e6 items give ~7e6 pairs)
    items_l, a_l, b_l = [], [], []
    for k in np.flatnonzero(np.bincount(K[compared])) if compared.any() else []:
        idx = np.flatnonzero(compared & (K == k)).astype(np.int32)
        ia, ib = np.triu_indices(int(k), 1)
        items_l.append(np.repeat(idx, len(ia)))
        a_l.append(np.tile(ia.astype(np.int8), len(idx)))
        b_l.append(np.tile(ib.astype(np.int8), len(idx)))
    if items_l:
        p_item = np.concatenate(items_l)
        p_a = np.concatenate(a_l)
        p_b = np.concatenate(b_l)
    else:
        p_item = np.zeros(0, np.int32)
        p_a = p_b = np.zeros(0, np.int8)
    off32 = offsets.astype(np.int64 if offsets[-1] >= 2**31 - 64 else np.int32)
    base = off32[p_item]
    fa, fb = base + p_a, base + p_b
    del base
    if not usable.all():
        keep = usable[fa] & usable[fb]
        p_item, p_a, p_b, fa, fb = p_item[keep], p_a[keep], p_b[keep], fa[keep], fb[keep]
    return p_item, p_a, p_b, fa, fb


def _score_near_pairs(ca, cb, exact, sim, near, contrast, norm_texts, chars, toks, isnum, *, lev_threshold,
                      lev_min_chars, token_set_threshold, token_min, short_max_chars, workers) -> int:
    """Near duplicates on the unique non-identical normalised text pairs (Levenshtein similarity, else
    token-set ratio; texts that differ only in their numbers or are contrastive are not near
    duplicates). Fills ``sim``, ``near`` and ``contrast`` per pair in place; returns the number of
    unique text pairs scored."""
    import pyarrow as pa

    from .text_norm import skeletons

    n_norm = len(norm_texts)
    ne = np.flatnonzero(~exact)
    n_fuzzy_pairs = 0
    if len(ne):
        lo, hi = np.minimum(ca[ne], cb[ne]), np.maximum(ca[ne], cb[ne])
        ukey, inv = _unique_inverse(lo * n_norm + hi, n_norm * n_norm)
        ulo, uhi = ukey // n_norm, ukey % n_norm
        lmin, lmax = np.minimum(chars[ulo], chars[uhi]), np.maximum(chars[ulo], chars[uhi])
        base = ~isnum[ulo] & ~isnum[uhi] & (lmin > short_max_chars)
        e_lev = base & (lmin >= lev_min_chars) & (lmin >= lev_threshold * lmax - 1e-9)
        e_tok = base & (toks[ulo] >= token_min) & (toks[uhi] >= token_min)
        cand = np.flatnonzero(e_lev | e_tok)
        usim = np.zeros(len(ukey))
        ucls = np.zeros(len(ukey), np.int8)  # 0 none, 1 near, 2 contrastive
        if len(cand):
            # texts that differ only in their numbers are numeric differences, not near duplicates
            mark = np.zeros(n_norm, bool)
            mark[ulo[cand]] = True
            mark[uhi[cand]] = True
            involved = np.flatnonzero(mark)
            sk_codes = np.full(n_norm, -1, np.int64)
            sk = pa.array(skeletons(pa.array(norm_texts[involved], type=pa.string())), type=pa.string())
            sk_codes[involved] = sk.dictionary_encode().indices.to_numpy(zero_copy_only=False)
            same_sk = sk_codes[ulo[cand]] == sk_codes[uhi[cand]]
            ucls[cand[same_sk]] = 2  # changed numbers: contrastive options, never near duplicates
            cand = cand[~same_sk]
        if len(cand):
            from rapidfuzz import fuzz, process
            from rapidfuzz.distance import Levenshtein

            n_fuzzy_pairs = len(cand)
            qa, qb = norm_texts[ulo[cand]].tolist(), norm_texts[uhi[cand]].tolist()
            lev = process.cpdist(qa, qb, scorer=Levenshtein.normalized_similarity, workers=workers,
                                 dtype=np.float64).ravel()
            lev_ok = e_lev[cand] & (lev >= lev_threshold - 1e-9)
            tok = np.zeros(len(cand))
            need = np.flatnonzero(e_tok[cand] & ~lev_ok)
            if len(need):
                tok[need] = process.cpdist([qa[i] for i in need], [qb[i] for i in need],
                                           scorer=fuzz.token_set_ratio, workers=workers,
                                           dtype=np.float64).ravel()
            tok_ok = e_tok[cand] & (tok >= token_set_threshold - 1e-9)
            s = np.where(e_lev[cand], lev, 0.0)
            for j in np.flatnonzero(lev_ok | tok_ok):
                ta, tb = qa[j], qb[j]
                if _is_contrastive(ta, tb) or _is_permutation(ta, tb) or _is_relabel(ta, tb):
                    ucls[cand[j]] = 2
                    s[j] = 0.0
                elif lev_ok[j]:
                    ucls[cand[j]] = 1
                elif not _is_token_subset(ta, tb):
                    ucls[cand[j]] = 1
                    s[j] = max(s[j], tok[j] / 100.0)
            usim[cand] = s
        sim[ne] = usim[inv]
        near[ne] = ucls[inv] == 1
        contrast[ne] = ucls[inv] == 2
    return n_fuzzy_pairs


def _best_pair(Q, p_item, p_a, p_b, sev_pair, sim, exact, near, contrast, p_gold):
    """Per item, the pair that explains its finding (most severe, then most similar): its tier
    (exact / near / contrastive), its letters ("A=B", "A~B", "A<>B") and whether the gold is in it."""
    tier = np.full(Q, "", dtype=object)
    pair_txt = np.full(Q, "", dtype=object)
    inv_gold = np.zeros(Q, bool)
    interesting = np.flatnonzero((sev_pair > 0) | contrast)
    if len(interesting):
        key = sev_pair[interesting] * 2.0 + sim[interesting] + contrast[interesting] * 0.5
        order = np.lexsort((-key, p_item[interesting]))
        sel = interesting[order]
        ps = p_item[sel]
        first = np.ones(len(ps), bool)
        first[1:] = ps[1:] != ps[:-1]
        best = sel[first]
        it = p_item[best]
        letters = np.array(list(LETTERS))
        sep = np.where(exact[best], "=", np.where(near[best], "~", "<>"))
        pair_txt[it] = np.char.add(np.char.add(letters[p_a[best]], sep), letters[p_b[best]]).astype(object)
        tier[it] = np.where(exact[best], "exact", np.where(near[best], "near", "contrastive"))
        inv_gold[it] = p_gold[best] & (exact[best] | near[best])
    return tier, pair_txt, inv_gold


def _category_rows(frame: AuditFrame, compared: np.ndarray, has_exact: np.ndarray, has_near: np.ndarray,
                   ) -> list[dict]:
    """Exact- and near-duplicate shares of the compared items, overall and per category (Wilson)."""
    codes, labels = frame.category_codes("category")
    rows = []
    for stat, hit in (("exact_duplicate_share", has_exact), ("near_duplicate_share", has_near)):
        n_c = np.bincount(codes, weights=compared, minlength=len(labels))
        k_c = np.bincount(codes, weights=hit & compared, minlength=len(labels))
        tot_n, tot_k = int(compared.sum()), int((hit & compared).sum())
        l0, h0 = wilson_ci(tot_k, tot_n)
        rows.append({"category": "(all)", "arm": None, "field": None, "statistic": stat,
                     "estimate": tot_k / tot_n if tot_n else np.nan, "ci_low": float(l0), "ci_high": float(h0),
                     "n_items": tot_n})
        lc, hc = wilson_ci(k_c, n_c)
        for j, lab in enumerate(labels):
            rows.append({"category": lab, "arm": None, "field": None, "statistic": stat,
                         "estimate": k_c[j] / n_c[j] if n_c[j] else np.nan, "ci_low": float(lc[j]),
                         "ci_high": float(hc[j]), "n_items": int(n_c[j])})
    return rows


def _placeholders(frame: AuditFrame, gold: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """The placeholder table (:mod:`audit_hub.detectors.placeholders`), placeholder-gold items and the number of
    placeholder distractors per item."""
    from .placeholders import placeholder_table

    ph = placeholder_table(frame)
    ph_gold = ph["gold_placeholder"] & (gold >= 0)
    return ph, ph_gold, ph["n_placeholders"] - ph_gold


def _mark_placeholders(sev: np.ndarray, tier: np.ndarray, ph_gold: np.ndarray, ph_distractors: np.ndarray) -> None:
    """In place: a placeholder distractor is high (rewrite it), a placeholder gold critical (relabel)."""
    sev[ph_distractors > 0] = np.maximum(sev[ph_distractors > 0], 3)
    sev[ph_gold] = 4
    tier[(tier == "") & (ph_distractors > 0)] = "placeholder"
    tier[ph_gold] = "placeholder gold"


def _summary(*, K, compared, bare_item, p_item, exact, near, contrast, p_gold, has_exact, has_near, n_fuzzy_pairs,
             flagged, sev, params, seed, ph_gold, ph_distractors) -> dict:
    """Headline counts (items and pairs; with the gold involved), the exact-duplicate share with its
    Wilson interval, what was compared, the severity counts and the notes on bare-letter options."""
    Q = len(K)
    n_compared = int(compared.sum())
    notes = []
    if bare_item.any():
        notes.append(f"{count(bare_item.sum(), 'item')} {'has' if bare_item.sum() == 1 else 'have'} bare-letter options (each option text is just its "
                     "letter, e.g. ['A', 'B', 'C', 'D', 'E']; the real options are presumably in the image); "
                     "they are excluded from text comparison.")
    if n_compared == 0:
        notes.append("no item has two or more comparable option texts.")
    exact_gold_items = np.zeros(Q, bool)
    exact_gold_items[p_item[exact & p_gold]] = True
    near_gold_items = np.zeros(Q, bool)
    near_gold_items[p_item[near & p_gold]] = True
    lo, hi = wilson_ci(int(has_exact.sum()), n_compared)
    summary = {
        "n_exact_duplicates": int(has_exact.sum()),
        "n_near_duplicates": int(has_near.sum()),
        "n_exact_duplicates_with_gold": int(exact_gold_items.sum()),
        "n_near_duplicates_with_gold": int(near_gold_items.sum()),
        "n_exact_duplicate_pairs": int(exact.sum()),
        "n_near_duplicate_pairs": int(near.sum()),
        "n_contrastive_pairs": int(contrast.sum()),
        "exact_duplicate_share": float(has_exact.sum() / n_compared) if n_compared else None,
        "exact_duplicate_share_ci": [float(lo), float(hi)] if n_compared else None,
        "n_items_with_options": int((K > 0).sum()),
        "n_items_compared": n_compared,
        "n_bare_letter_option_items": int(bare_item.sum()),
        "n_placeholder_gold": int(ph_gold.sum()),
        "n_placeholder_distractor_items": int((ph_distractors > 0).sum()),
        **item_accounting(Q, [("no option texts", K == 0),
                              ("bare-letter options (no option texts in the file: drawn in the image, or left out)",
                               bare_item),
                              ("fewer than 2 comparable option texts", ~compared)]),
        "n_pairs_compared": int(len(p_item)),
        "n_pairs_fuzzy_scored": int(n_fuzzy_pairs),
        "n_flagged": int(flagged.sum()),
        "p_value": None,
        "notes": notes,
        "severity_counts": {lvl: int(c) for lvl, c in zip(
            LEVELS, np.bincount(np.minimum(sev, len(LEVELS) - 1), minlength=len(LEVELS)))},
        "params": params,
        "seed": seed,
    }
    return summary


def _item_severity(Q: int, p_item: np.ndarray, sim: np.ndarray, exact: np.ndarray, near: np.ndarray,
                   p_gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair the severity code (4 exact with gold, 3 exact, 2 near with gold, 1 near, 0), per item
    its largest pair severity and largest pair similarity."""
    sev_pair = np.where(exact, np.where(p_gold, 4, 3), np.where(near, np.where(p_gold, 2, 1), 0))
    sev = np.zeros(Q, np.int64)
    nz = sev_pair > 0  # zeros cannot raise the maximum; ufunc.at over every pair is slow
    np.maximum.at(sev, p_item[nz], sev_pair[nz])
    max_sim = np.zeros(Q)
    pos_sim = sim > 0
    np.maximum.at(max_sim, p_item[pos_sim], sim[pos_sim])
    return sev_pair, sev, max_sim


def run(frame: AuditFrame, *, field: str = "hit", seed: int = 0, lev_threshold: float = 0.9,
        lev_min_chars: int = 8, token_set_threshold: float = 90.0, token_min: int = 2,
        short_max_chars: int = 3, workers: int = -1) -> DetectorResult:
    """Find exact and near-duplicate options within each item (see the module docstring).

    ``field`` and ``seed`` are accepted for the common signature and not used (no randomness).
    """
    q = frame.questions
    Q = frame.n_questions
    K = frame.n_options.astype(np.int64)
    if not (K > 0).any():
        raise DetectorSkipped("no option texts")
    gold = frame.gold_index.astype(np.int64)

    offsets, parent, pos, raw_code, nt, norm_code_u, norm_texts, chars, toks, isnum = _flatten_options(q)
    bare = nt.bare_letter[raw_code] == pos
    ncode = norm_code_u[raw_code].astype(np.int64)
    ph, ph_gold, ph_distractors = _placeholders(frame, gold)
    usable = ~bare & (chars[ncode] > 0) & ~ph["option_is_placeholder"]
    n_bare = np.bincount(parent, weights=bare, minlength=Q).astype(np.int64)
    bare_item = (K > 0) & (n_bare == K)
    n_usable = np.bincount(parent, weights=usable, minlength=Q).astype(np.int64)
    compared = n_usable >= 2

    p_item, p_a, p_b, fa, fb = _option_pairs(K, compared, offsets, usable)
    ca, cb = ncode[fa], ncode[fb]
    exact = ca == cb
    p_gold = (gold[p_item] == p_a) | (gold[p_item] == p_b)
    sim = exact.astype(np.float64)
    near = np.zeros(len(ca), bool)
    contrast = np.zeros(len(ca), bool)

    n_fuzzy_pairs = _score_near_pairs(ca, cb, exact, sim, near, contrast, norm_texts, chars, toks, isnum,
                                      lev_threshold=lev_threshold, lev_min_chars=lev_min_chars,
                                      token_set_threshold=token_set_threshold, token_min=token_min,
                                      short_max_chars=short_max_chars, workers=workers)

    # ---- per question
    sev_pair, sev, max_sim = _item_severity(Q, p_item, sim, exact, near, p_gold)
    n_exact_pairs, n_near_pairs, n_contrast_pairs = (np.bincount(p_item[m], minlength=Q) for m in (exact, near, contrast))
    tier, pair_txt, inv_gold = _best_pair(Q, p_item, p_a, p_b, sev_pair, sim, exact, near, contrast, p_gold)
    _mark_placeholders(sev, tier, ph_gold, ph_distractors)
    flagged = sev > 0
    per_question = pd.DataFrame({
        "question_id": frame.question_id_column(),
        f"{NAME}_score": 1.0 - max_sim,
        f"is_{NAME}_issue": flagged,
        f"{NAME}_severity": severity_array(sev),
        f"{NAME}_tier": tier,
        f"{NAME}_pair": pair_txt,
        f"{NAME}_similarity": max_sim,
        f"{NAME}_involves_gold": inv_gold,
        f"{NAME}_n_exact_pairs": n_exact_pairs.astype(np.int64),
        f"{NAME}_n_near_pairs": n_near_pairs.astype(np.int64),
        f"{NAME}_n_contrastive_pairs": n_contrast_pairs.astype(np.int64),
        f"{NAME}_bare_letter_options": bare_item,
        f"{NAME}_n_options_compared": n_usable,
        f"{NAME}_placeholder_gold": ph_gold,
        f"{NAME}_rewrite_options": flagged & ~ph_gold,
        f"{NAME}_n_placeholder_distractors": ph_distractors.astype(np.int64),
    })

    has_exact = n_exact_pairs > 0
    has_near = n_near_pairs > 0
    params = {"lev_threshold": lev_threshold, "lev_min_chars": lev_min_chars,
              "token_set_threshold": token_set_threshold, "token_min": token_min,
              "short_max_chars": short_max_chars}
    summary = _summary(K=K, compared=compared, bare_item=bare_item, p_item=p_item, exact=exact, near=near,
                       contrast=contrast, p_gold=p_gold, has_exact=has_exact, has_near=has_near,
                       n_fuzzy_pairs=n_fuzzy_pairs, flagged=flagged, sev=sev, params=params, seed=seed,
                       ph_gold=ph_gold, ph_distractors=ph_distractors)
    rows = _category_rows(frame, compared, has_exact, has_near)
    table = summary_rows(NAME, rows)
    return DetectorResult(name=NAME, per_question=per_question, summary=summary, table=table,
                          params=summary["params"])


# ---------------------------------------------------------------------------------------- report phrases
def evidence_phrase(p: pd.DataFrame, label: str) -> pd.Series:
    """The report's evidence phrase for flagged rows ``p`` of the questions table."""
    out = str_labels(p[f"{NAME}_tier"]).str.replace("_", " ", regex=False) + " options"
    out = out + " " + str_labels(p[f"{NAME}_pair"]) + " (similarity " + num_labels(p[f"{NAME}_similarity"]) + ")"
    gold_inv = p[f"{NAME}_involves_gold"].fillna(False).astype(bool).to_numpy()
    return out.where(~gold_inv, out + ", one of them gold")


def limitation_lines(s: dict) -> list[str]:
    """The card's limitations this detector's summary ``s`` states (its own counts)."""
    n = s.get("n_bare_letter_option_items") or 0
    if not n:
        return []
    return [f"{fmt_num(n)} multiple-choice items have options that are bare letters ('A'..'E', '(A)', ...: the "
            "option texts are not in the file, drawn in the image or left out); option-text detectors skip those "
            "items and say so."]


def card_line(s: dict) -> str:
    """The card's one-line finding on this detector's summary ``s``."""
    txt = (f"**{NAME}**: {count(s.get('n_exact_duplicates') or 0, 'question')} with exact-duplicate "
           f"options and {fmt_num(s.get('n_near_duplicates'))} with near-duplicates")
    if isnum(s.get("n_bare_letter_option_items")) and s.get("n_bare_letter_option_items"):
        txt += (f"; {fmt_num(s.get('n_bare_letter_option_items'))} questions whose options are bare letters "
                "(no option texts in the file: drawn in the image, or left out) were not compared")
    txt += (f"; placeholder options (missing values: empty, nan, None as trailing padding, ...): {fmt_num(s.get('n_placeholder_gold') or 0)} "
            f"question(s) whose **gold** is a placeholder (unanswerable as released: relabel) and "
            f"{fmt_num(s.get('n_placeholder_distractor_items') or 0)} with placeholder distractors "
            "(rewrite; they are left out of every option count)")
    return txt + "."
