"""Permutation nulls on contingency tables with fixed margins, sampled without permuting items.

Setting. Each of ``N`` items has a row value (e.g. ``f``, the number of models correct *with* the
image) and a column value (``b``, the number correct *blind*). Shuffling the column values across
items (a uniform random bijection between the items' row values and the multiset of column values)
keeps both margins of the (row x column) count table and breaks only the pairing. Under that null the
table is the multivariate (Fisher-Freeman-Halton) hypergeometric table with the observed margins, so
any statistic that depends on the table alone can be sampled from the margins, in time independent
of ``N``.

Two samplers:

* :func:`sample_table` draws whole tables (sequential conditional hypergeometric draws, one
  ``rng.hypergeometric`` call of shape ``(B,)`` per cell): ``O(B * R * C)``. General, used for
  checks and small tables.
* :func:`sample_matched_sum` draws only the sum of a *matching* of cells, one cell per matched
  (row value, column value) pair, e.g. the diagonal ``f == b``. It needs three hypergeometric draws per
  matched pair (``O(B * P)``), vectorised over many strata / model pools at once, because of an
  exchangeability argument (see the function's docstring). Its cost does not grow with the items but with
  strata x matched pairs x B: about 0.5 microseconds per (stratum, pair, permutation) on the reference
  machine (``rng.hypergeometric``: about 170 ns a draw).

One literal sampler, for one or many pairings of the same items:

* :func:`shared_permutation_matches` permutes the items themselves (within strata), once per permutation
  (about 16 ns an item), and counts the matches of every pairing under that one permutation (about 2.5 ns an
  item and pairing): ``O(B * N)``, whatever the number of matched pairs. ``P`` grows with the models, so on a
  wide pool (many models, few items) this is the cheaper exact sampler (:func:`literal_is_cheaper`), above all
  for a leave-one-model-out loop, which has one pairing per left-out model (5,000 items x 150 models: 15 s ->
  about 2 s on one thread).

Closed-form moments. For the table ``X`` with row margin ``r``, column margin ``c`` and total ``N``,
``E[X_ij] = r_i c_j / N`` and (a classical result for the hypergeometric contingency table)
``Cov(X_ij, X_kl) = r_i (N d_ik - r_k) * c_j (N d_jl - c_l) / (N^2 (N - 1))`` with ``d`` the
Kronecker delta. Hence for a 0/1 cell mask ``S`` the sum ``T = sum S_ij X_ij`` has
``Var T = sum_{jl} (S' A S)_{jl} B_{jl} / (N^2 (N-1))`` with ``A = N diag(r) - r r'`` and
``B = N diag(c) - c c'``; for a matching it reduces to :func:`matched_sum_moments`.
"""

from __future__ import annotations

import numpy as np


def matched_pairs(n_rows: int, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Cells (i, j) of an ``n_rows x n_cols`` table with equal shares ``i/(n_rows-1) == j/(n_cols-1)``.

    With ``f`` correct of ``Mf`` models in one arm and ``b`` of ``Mb`` in the other, the table has
    ``Mf+1`` rows and ``Mb+1`` columns and zero gain in *share* is the exact rational comparison
    ``f * Mb == b * Mf``. For a square table these are the diagonal cells.
    """
    mf, mb = n_rows - 1, n_cols - 1
    if mf < 1 or mb < 1:
        raise ValueError("need at least one model in each arm")
    i = np.arange(n_rows)
    ok = (i * mb) % mf == 0
    return i[ok], (i[ok] * mb) // mf


def matched_sum_moments(r, c, n) -> tuple[np.ndarray, np.ndarray]:
    """Null mean and variance of the count in matched cells, vectorised over leading axes.

    r, c: (..., P) counts of items whose row value / column value is the k-th matched pair's;
    n: (...,) number of items. Returns (mean, var), each of shape (...,). Items whose values are in
    no matched pair only enter through ``n``.
    """
    r = np.asarray(r, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rc = (r * c).sum(axis=-1)
        mean = np.where(n > 0, rc / n, 0.0)
        num = (r * c * (n[..., None] - r) * (n[..., None] - c)).sum(axis=-1) - (r * r * c * c).sum(axis=-1) + rc * rc
        var = np.where(n > 1, num / (n * n * (n - 1)), 0.0)
    return mean, np.maximum(var, 0.0)


def sample_matched_sum(r, c, n, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Draw the matched-cell count under the fixed-margin null: shape (G, n_samples), int64.

    r, c: (G, P) row / column counts of the P matched value pairs in each of G independent tables
    (strata, or model pools in a leave-one-out loop); n: (G,) items per table. Each column of the
    output is one permutation; sum rows over strata to get a stratified null.

    Algorithm (exact, 3 draws per matched pair). Process the pairs k = 0..P-1 in order, pairing off
    all items with row value k and all column slots with value k at step k. Let ``U`` be the number
    of still-unpaired items (= unpaired slots). Every unpaired item has a row value not yet processed,
    and the items with a given *unprocessed* value were treated exchangeably by all earlier steps,
    so, given how many of the ``R_k`` items with unprocessed row values are already paired
    (``R_k - U``), the paired ones form a uniform subset: the free items of value k number
    ``u = r_k - Hyp(r_k, R_k - r_k, R_k - U)``; likewise ``v`` free slots of value k. The free items
    and slots are in uniform random bijection, so the matched count is ``x = Hyp(v, U - v, u)``; the
    step pairs ``u + v - x`` items. The item-side and slot-side subsets are independent given their
    sizes (the law is invariant under permuting items and slots separately).
    """
    r = np.atleast_2d(np.asarray(r, dtype=np.int64))
    c = np.atleast_2d(np.asarray(c, dtype=np.int64))
    n = np.atleast_1d(np.asarray(n, dtype=np.int64))
    g, p = r.shape
    if c.shape != (g, p) or n.shape != (g,):
        raise ValueError("r and c must be (G, P) and n (G,)")
    if (r.sum(axis=1) > n).any() or (c.sum(axis=1) > n).any() or (r < 0).any() or (c < 0).any():
        raise ValueError("matched counts exceed the number of items")
    b = int(n_samples)
    shape = (g, b)
    free = np.broadcast_to(n[:, None], shape).copy()       # U: unpaired items (= unpaired slots)
    rows_left = n.copy()                                  # R_k: items with row value not yet processed
    cols_left = n.copy()                                  # C_k
    total = np.zeros(shape, dtype=np.int64)
    for k in range(p):
        rk = r[:, k][:, None]
        ck = c[:, k][:, None]
        rl = rows_left[:, None]
        cl = cols_left[:, None]
        u = rk - rng.hypergeometric(np.broadcast_to(rk, shape), np.broadcast_to(rl - rk, shape), rl - free)
        v = ck - rng.hypergeometric(np.broadcast_to(ck, shape), np.broadcast_to(cl - ck, shape), cl - free)
        x = rng.hypergeometric(v, free - v, u)
        total += x
        free -= u + v - x
        rows_left = rows_left - r[:, k]
        cols_left = cols_left - c[:, k]
    return total


def sample_table(row_margin, col_margin, n_samples: int, rng: np.random.Generator) -> np.ndarray:
    """Draw whole tables with the given margins under the permutation null: (n_samples, R, C) int64.

    Row i takes ``r_i`` of the remaining column slots; its split over columns is a multivariate
    hypergeometric draw made column by column (``x_ij ~ Hyp(c_j left, slots right of j, r_i left)``).
    """
    r = np.asarray(row_margin, dtype=np.int64)
    c = np.asarray(col_margin, dtype=np.int64)
    if r.sum() != c.sum():
        raise ValueError("row and column margins must have the same total")
    nr, nc = len(r), len(c)
    b = int(n_samples)
    out = np.zeros((b, nr, nc), dtype=np.int64)
    col_left = np.broadcast_to(c, (b, nc)).copy()
    for i in range(nr):
        need = np.full(b, r[i], dtype=np.int64)
        right = col_left.sum(axis=1)
        for j in range(nc - 1):
            right = right - col_left[:, j]
            x = rng.hypergeometric(col_left[:, j], right, need)
            out[:, i, j] = x
            need -= x
        out[:, i, nc - 1] = need
        col_left -= out[:, i, :]
    return out


#: measured costs in nanoseconds (reference machine) that choose between the two exact samplers: one (table, matched
#: pair, permutation) of :func:`sample_matched_sum` (three ``rng.hypergeometric`` draws of about 170 ns); one (item,
#: permutation) of the within-strata shuffle of :func:`shared_permutation_matches` (``Generator.permuted``); one (item,
#: permutation, pairing) of its gather-and-compare
TABLE_NS, PERMUTE_NS, MATCH_NS = 500.0, 16.0, 2.5
#: the item permutation is chosen only where its estimated cost is below the table sampler's by this factor
LITERAL_MARGIN = 2.0
#: (permutations x items) of one chunk of :func:`shared_permutation_matches` (int32 indices: 16 MB)
LITERAL_CHUNK_CELLS = 4_000_000


def literal_is_cheaper(n_items: int, n_tables: int, n_pairs: int, n_pairings: int = 1) -> bool:
    """Whether :func:`shared_permutation_matches` (a shuffle of ``n_items`` per permutation, then one gather per
    pairing) is clearly cheaper than :func:`sample_matched_sum` (``n_tables`` nonempty tables x ``n_pairs`` matched
    pairs per permutation and pairing), by the measured costs :data:`TABLE_NS`, :data:`PERMUTE_NS`, :data:`MATCH_NS`
    and the margin :data:`LITERAL_MARGIN`. A wide pool (many models: many matched pairs) on few items takes the item
    permutation; a deep one (many items) the tables."""
    literal = float(n_items) * (PERMUTE_NS + n_pairings * MATCH_NS)
    table = float(n_pairings) * n_tables * n_pairs * TABLE_NS
    return LITERAL_MARGIN * literal < table


def _strata_permutations(strata: np.ndarray, n_samples: int, rng: np.random.Generator, chunk_cells: int):
    """``(order, starts, chunks)``: the items sorted by stratum (``order``), where each stratum's block starts,
    and a generator of ``(first, perm)`` chunks, ``perm`` (b, N) int32 positions in that sorted order, each row a
    uniform shuffle of every block (``Generator.permuted``), at most ``chunk_cells`` entries a chunk."""
    n = len(strata)
    order = np.argsort(strata, kind="stable")
    ss = strata[order]
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]]) if n else np.zeros(0, np.int64)
    bounds = np.r_[starts, n]
    base = np.arange(n, dtype=np.int32)
    step = max(1, int(chunk_cells) // max(n, 1))

    def chunks():
        for a in range(0, int(n_samples), step):
            bsz = min(step, int(n_samples) - a)
            perm = np.empty((bsz, n), dtype=np.int32)
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                perm[:, lo:hi] = rng.permuted(np.broadcast_to(base[lo:hi], (bsz, hi - lo)), axis=1)
            yield a, perm
    return order, starts, chunks()


def shared_permutation_matches(strata: np.ndarray, pairing, n_pairings: int, n_samples: int,
                               rng: np.random.Generator, *, per_stratum: bool = False,
                               chunk_cells: int = LITERAL_CHUNK_CELLS) -> np.ndarray:
    """Matched counts of ``n_pairings`` pairings of the same items under ``n_samples`` uniform permutations of
    the items within ``strata``, each permutation shared by every pairing: (n_pairings, n_samples) int64, or
    (n_pairings, n_strata, n_samples) per stratum with ``per_stratum`` (``n_strata = strata.max() + 1``).

    ``pairing(d)`` returns ``(target, value)``, two (N,) integer arrays: pairing ``d`` counts the items ``i``
    with ``target[i] == value[pi(i)]`` (``pi`` the permutation; a target of -1 matches nothing when values
    are >= 0). Under that permutation null the count's law is the one :func:`sample_matched_sum` draws from the
    margins (the same fixed-margin table, independent across strata), so the two samplers are interchangeable in
    law; this one costs ``O(n_samples * N)`` whatever the number of matched pairs. Sharing the permutations across
    pairings (common random numbers) leaves each pairing's own null exact. The permutations (``Generator.permuted``
    within each stratum's block) are drawn in chunks of at most ``chunk_cells`` (permutations x items), so memory
    does not grow with ``n_samples``."""
    strata = np.asarray(strata, dtype=np.int64)
    n = len(strata)
    n_strata = int(strata.max()) + 1 if n else 0
    out = np.zeros((int(n_pairings), n_strata if per_stratum else 1, int(n_samples)), dtype=np.int64)
    if n == 0 or n_samples <= 0 or n_pairings <= 0:
        return out if per_stratum else out[:, 0, :]
    order, starts, chunks = _strata_permutations(strata, n_samples, rng, chunk_cells)
    ss = strata[order]
    for a, perm in chunks:
        bsz = perm.shape[0]
        for d in range(int(n_pairings)):
            target, value = pairing(d)
            hit = np.asarray(value)[order][perm] == np.asarray(target)[order][None, :]
            if per_stratum:
                out[d, ss[starts], a:a + bsz] = np.add.reduceat(hit, starts, axis=1, dtype=np.int64).T
            else:
                out[d, 0, a:a + bsz] = np.count_nonzero(hit, axis=1)
    return out if per_stratum else out[:, 0, :]


def shared_permutation_drops(strata: np.ndarray, f: np.ndarray, b: np.ndarray, drop_f: np.ndarray,
                             drop_b: np.ndarray, n_samples: int, rng: np.random.Generator, *,
                             chunk_cells: int = LITERAL_CHUNK_CELLS) -> np.ndarray:
    """:func:`shared_permutation_matches` for the pairings ``f - drop_f[d]`` against ``b - drop_b[d]`` (a paired
    leave-one-model-out loop: ``drop_f``, ``drop_b`` (D, N) 0/1, model ``d``'s correct answers in each arm), with
    the same permutations and the same counts, faster: a 0/1 change on each side moves ``f - b`` by at most one,
    so only the item-and-slot pairs with ``|f - b(pi)| <= 1`` can match for any ``d``, and only those are read
    for each left-out model. (D, n_samples) int64."""
    strata = np.asarray(strata, dtype=np.int64)
    n, D = len(strata), int(len(drop_f))
    out = np.zeros((D, int(n_samples)), dtype=np.int64)
    if n == 0 or n_samples <= 0 or D == 0:
        return out
    order, _starts, chunks = _strata_permutations(strata, n_samples, rng, chunk_cells)
    fs, bs = np.asarray(f, np.int32)[order], np.asarray(b, np.int32)[order]
    xs = np.ascontiguousarray(np.asarray(drop_f, np.int8)[:, order])
    ys = np.ascontiguousarray(np.asarray(drop_b, np.int8)[:, order])
    for a, perm in chunks:
        bsz = perm.shape[0]
        diff = fs[None, :] - bs[perm]                       # (b, N): f - b(pi)
        rows, cols = np.nonzero(np.abs(diff) <= 1)
        dv = diff[rows, cols].astype(np.int8)
        slot = perm[rows, cols]
        for d in range(D):
            # f - x == b(pi) - y(pi)  <=>  f - b(pi) == x - y(pi)
            hit = (xs[d, cols] - ys[d, slot]) == dv
            out[d, a:a + bsz] = np.bincount(rows[hit], minlength=bsz)
    return out
