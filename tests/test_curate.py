"""benchaudit curate end to end: planted simulations, a curated set worse than random, junk, IRT, the CLI,
the bundled example and the benchmark's smoke size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from audit_hub.curate.irt import anchors_kmeans, estimate_scores, fit_2pl
from audit_hub.curate.junk import inject_junk
from audit_hub.curate.pipeline import CurateConfig, run_curation
from audit_hub.curate.simulate import simulate_pool
from audit_hub.frame.core import AuditFrame

ROOT = Path(__file__).resolve().parents[1]
FAST = {"n_boot": 200, "n_random": 200, "pair_boot": 100, "score_budget": 40, "ibp": "off"}

SUMMARY_KEYS = ("heldout_spearman_rho", "heldout_spearman_rho_ci", "heldout_kendall_tau", "spearman_rho",
                "discrimination_before", "discrimination_after", "random_subset_rho_mean", "n_before", "n_after",
                "removed_by_stage")


@pytest.fixture(scope="module")
def planted():
    frame = simulate_pool(1500, 15, seed=3)
    res = run_curation(frame, CurateConfig(target_size=450, junk_fractions=(0.5,), method="point_biserial", **FAST),
                       model_dates=frame.meta["model_dates"])
    return frame, res


def test_planted_defects_removed_with_high_recall(planted):
    frame, res = planted
    ids = frame.questions["question_id"].astype(str).to_numpy()
    for kind, lst in frame.meta["planted"].items():
        m = np.isin(ids, lst)
        recall = 1 - res.kept[m].mean()
        assert recall >= 0.97, (kind, recall)
    # the stage that removes each planted kind is the one designed for it
    rm = res.removed.set_index("question_id")
    sat = rm.loc[rm.index.isin(frame.meta["planted"]["saturated"]), "stage"]
    assert (sat == "saturation").mean() > 0.95
    bs = rm.loc[rm.index.isin(frame.meta["planted"]["blind_solvable"]), "stage"]
    assert (bs == "text_ablation").mean() > 0.95
    s = res.summary
    assert s["n_before"] == 1500 and s["n_after"] == 450
    assert sum(s["removed_by_stage"].values()) == 1500 - 450


def test_summary_keys_and_heldout_rankings(planted):
    _, res = planted
    s = res.summary
    for k in SUMMARY_KEYS:
        assert k in s, k
    assert set(s["discrimination_before"]) == {"sd", "point_biserial", "significant_pairs"}
    lo, hi = s["heldout_spearman_rho_ci"]
    assert lo <= s["heldout_spearman_rho"] <= hi
    # the planted pool has a clean 2PL ranking signal: held-out rankings are kept
    assert s["heldout_spearman_rho"] >= 0.9
    assert s["heldout_kendall_tau"] >= 0.75
    assert not s["worse_than_random"]
    # removing saturated and blind-solvable items separates models more
    assert s["discrimination_change"]["sd"] > 0.78
    assert s["image_dependency"]["after"]["blind_solvable_share"] < 0.01 < s["image_dependency"]["before"]["blind_solvable_share"]
    # 15 models: the newest third (5) is too few for a rank correlation, and the summary says so
    assert s["newest_heldout"]["computed"] is False and "fewer than 6" in s["newest_heldout"]["reason"]
    assert len(s["baselines"]) == 4 and s["baselines"]["random_subset"]["n_draws"] == 200
    # junk: most junk items are removed and rankings survive
    j = s["junk"][0]
    assert j["n_junk"] == 750 and j["junk_survival"] < 0.1 and j["heldout_spearman_rho"] > 0.85
    # the card sets survival beside the share a selection blind to junk would keep (450 of 2,250: 20.0%)
    from audit_hub.curate.output import _card_context

    junk_table = _card_context(res, {}, {})["junk"]
    assert "kept at random (the pool share kept)" in junk_table and "| 20.0% |" in junk_table
    assert s["score_estimation"]["mae_points"] < s["score_estimation"]["mae_points_by_estimator"]["random"] + 2


def _noise_trap_frame(seed: int = 0) -> AuditFrame:
    """Informative items that every model also solves blind (text ablation removes them) next to pure-noise
    items (every model right with probability 1/4, blind at chance): curation keeps only noise."""
    rng = np.random.default_rng(seed)
    n_inf, n_noise, M = 400, 400, 12
    Q = n_inf + n_noise
    theta = np.linspace(-2, 2, M)
    b = rng.normal(0, 1, n_inf)
    p_full = np.vstack([1 / (1 + np.exp(-2 * (theta[None, :] - b[:, None]))), np.full((n_noise, M), 0.25)])
    full = rng.random((Q, M)) < p_full
    blind = np.vstack([rng.random((n_inf, M)) < np.maximum(p_full[:n_inf] - 0.02, 0.9),
                       rng.random((n_noise, M)) < 0.25])
    blind[:n_inf] |= full[:n_inf]  # the image adds nothing on informative items
    qids = [f"q{i:04d}" for i in range(Q)]
    questions = pd.DataFrame({"question_id": qids, "question": [f"Q{i}" for i in range(Q)],
                              "options": [["w", "x", "y", "z"]] * Q, "answer": "A", "answer_type": "mc",
                              "category": np.where(np.arange(Q) % 2 == 0, "c0", "c1")})
    rows = []
    for arm, hit in (("full", full), ("blind", blind)):
        ans = np.where(hit, "A", "B")
        for m in range(M):
            rows.append(pd.DataFrame({"question_id": qids, "model": f"m{m:02d}", "arm": arm, "prediction": ans[:, m],
                                      "answer": ans[:, m], "hit": hit[:, m].astype(np.int8),
                                      "hit_exact": hit[:, m].astype(np.int8)}))
    return AuditFrame.from_tables(questions, pd.concat(rows, ignore_index=True))


def test_curated_set_worse_than_random_is_reported():
    frame = _noise_trap_frame()
    res = run_curation(frame, CurateConfig(junk_fractions=(), method="point_biserial", **FAST))
    s = res.summary
    assert s["removed_by_stage"]["text_ablation"] >= 380
    lo, _hi = s["random_subset_rho_interval"]
    assert s["heldout_spearman_rho"] < lo
    assert s["worse_than_random"] is True
    assert s["versus_random"].startswith("worse than random: held-out rho ")
    assert f"{s['heldout_spearman_rho']:.3f}" in s["versus_random"]


def test_default_choice_escapes_the_stage_trap():
    """The same pool with the default (auto) selection: the inner cross-validation sees that the stage output
    (pure noise) ranks held-out models worse than random and does not take it."""
    frame = _noise_trap_frame()
    res = run_curation(frame, CurateConfig(junk_fractions=(), **FAST))
    s = res.summary
    assert s["selection_choice"]["variant"] != "stages"
    assert s["worse_than_random"] is False
    assert s["heldout_spearman_rho"] >= s["random_subset_rho_mean"] - 0.05


def test_inject_junk_builds_the_three_kinds():
    frame = simulate_pool(300, 6, seed=5)
    jf, ids = inject_junk(frame, 0.3, seed=1)
    assert jf.n_questions == 390 and sum(len(v) for v in ids.values()) == 90
    q = jf.questions["question_id"].astype(str).to_numpy()
    full = jf.correctness("full", "hit")
    blind = jf.correctness("blind", "hit")
    bc = np.isin(q, ids["blind_copy"])
    assert (full[bc] == 1).all() and (blind[bc] == 1).all()
    # wrong keys: a model is right only if its answer is the new key, which differs from the source gold
    wk = np.isin(q, ids["wrong_key"])
    src = {qq: i for i, qq in enumerate(frame.questions["question_id"].astype(str))}
    assert (jf.questions.loc[wk, "answer"].to_numpy() != "").all()
    assert full[wk].mean() < 0.6
    ra = np.isin(q, ids["random_answer"])
    assert 0.1 < full[ra].mean() < 0.45
    assert len(src) == 300


def test_irt_recovers_abilities_and_estimates_scores():
    rng = np.random.default_rng(4)
    Q, M = 3000, 24
    a = rng.lognormal(0.3, 0.3, Q)
    b = rng.normal(0, 1, Q)
    theta = np.sort(rng.normal(0, 1, M))
    p_true = 1 / (1 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))
    x = (rng.random((Q, M)) < p_true).astype(float)
    k = np.ones_like(x)
    tr, te = np.arange(M) % 4 != 0, np.arange(M) % 4 == 0
    m = fit_2pl(x[:, tr], k[:, tr])
    from scipy import stats
    assert stats.spearmanr(m.theta, theta[tr])[0] > 0.97
    assert stats.spearmanr(-m.d / m.a, b)[0] > 0.85          # 18 models: difficulties are noisy
    assert np.abs(m.prob(m.theta) - p_true[:, tr]).mean() < 0.1  # the response surface is recovered
    idx, w = anchors_kmeans(m, 100, 0)
    assert len(idx) == 100 and w.sum() == pytest.approx(1.0)
    est = estimate_scores(m, idx, w, x[idx][:, te], k[idx][:, te], k[:, te], 1.0)
    truth = x[:, te].mean(axis=0)
    rnd = rng.choice(Q, 100, replace=False)
    assert np.abs(est["gpirt"] - truth).mean() < np.abs(x[rnd][:, te].mean(axis=0) - truth).mean()
    assert np.abs(est["gpirt"] - truth).mean() < 0.035


def test_heldout_selection_never_sees_the_heldout_models(monkeypatch):
    """Every fold's audit runs on the training models only, and the folds partition the models."""
    import audit_hub.curate.pipeline as pl

    seen = []
    real = pl.audit_findings

    def spy(frame, **kw):
        seen.append(tuple(frame.models_in("full")))
        return real(frame, **kw)

    monkeypatch.setattr(pl, "audit_findings", spy)
    frame = simulate_pool(600, 9, seed=11)
    res = run_curation(frame, CurateConfig(target_size=200, junk_fractions=(), **{**FAST, "score_budget": 0}))
    folds = res.summary["folds"]
    assert len(seen) == 1 + len(folds) and len(seen[0]) == 9
    held = [m for f in folds for m in f["test_models"]]
    assert sorted(held) == sorted(frame.models_in("full"))
    for models, f in zip(seen[1:], folds):
        assert not set(models) & set(f["test_models"]) and len(models) + len(f["test_models"]) == 9


def test_too_few_models_or_nothing_to_do_is_an_input_error():
    from audit_hub.errors import InputError

    with pytest.raises(InputError, match="at least 3 models"):
        run_curation(simulate_pool(60, 2, seed=1), CurateConfig(junk_fractions=(), **FAST))
    with pytest.raises(InputError, match="nothing would be curated"):
        run_curation(simulate_pool(60, 4, seed=1), CurateConfig(stages=(), junk_fractions=(), **FAST))


def test_max_rank_loss_picks_a_size():
    frame = simulate_pool(1200, 12, seed=7)
    res = run_curation(frame, CurateConfig(max_rank_loss=0.05, junk_fractions=(), **{**FAST, "score_budget": 0}))
    s = res.summary
    trace = s["selection"]["size_search"]
    assert trace and s["n_after"] <= s["n_after_stages"]
    ok = [t for t in trace if t["rank_loss"] <= 0.05]
    assert s["n_after"] == (min(t["size"] for t in ok) if ok else trace[0]["size"])


# ---------------------------------------------------------------------------------------------- CLI
def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audit_hub", "curate", *args], capture_output=True, text=True,
                          cwd=cwd, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def pool_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pool")
    q, r, meta = simulate_pool(900, 9, seed=2, as_tables=True)
    q.to_parquet(d / "questions.parquet", index=False)
    r.to_parquet(d / "runs.parquet", index=False)
    pd.DataFrame({"model": list(meta["model_dates"]), "date": list(meta["model_dates"].values())}).to_csv(
        d / "dates.csv", index=False)
    return d


def test_cli_end_to_end_writes_a_hub_folder(pool_files):
    d = pool_files
    out = d / "curated"
    p = _cli(["-q", str(d / "questions.parquet"), "-r", str(d / "runs.parquet"), "--target-size", "270",
              "--model-dates", str(d / "dates.csv"), "--n-boot", "200", "--score-budget", "40", "--junk", "0.25",
              "--threshold", "blind_min_share=0.8", "--out", str(out)], d)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "versus random: " in p.stdout and "leave-one-model-out" in p.stdout  # 9 models
    s = json.loads((out / "summary.json").read_text())["curation"]
    assert s["n_after"] == 270 and s["thresholds"]["blind_min_share"] == 0.8
    kept = pd.read_parquet(out / "data" / "test-00000-of-00001.parquet")
    removed = pd.read_parquet(out / "data" / "removed-00000-of-00001.parquet")
    assert len(kept) == 270 and len(removed) == 630
    assert kept["kept_by"].str.contains("; selected").all() and kept["kept_by"].str.startswith("passed ").all()
    assert {"question", "options", "answer", "category"} <= set(kept.columns)
    assert set(removed["stage"]) <= {"text_ablation", "saturation", "anomaly", "selection"}
    card = (out / "README.md").read_text()
    assert "not a new ground truth" in card and "figures/ranking_preservation.png" in card
    assert (out / "figures" / "discrimination.png").is_file()
    man = json.loads((out / "manifest.json").read_text())
    assert man["seeds"]["seed"] == 0 and any(o["path"] == "README.md" for o in man["outputs"])
    from datasets import load_dataset
    ds = load_dataset(str(out), split="test")
    assert ds.num_rows == 270


@pytest.mark.parametrize("args, needle", [
    (["--target-size", "0"], "--target-size"),
    (["--target-size", "10", "--max-rank-loss", "0.1"], "either --target-size or --max-rank-loss"),
    (["--threshold", "nonsense=1"], "unknown name 'nonsense'"),
    (["--stages", "saturation,foo"], "stages must be"),
])
def test_cli_bad_options_exit_2_and_leave_nothing(pool_files, args, needle):
    d = pool_files
    out = d / "never"
    p = _cli(["-q", str(d / "questions.parquet"), "-r", str(d / "runs.parquet"), "--out", str(out), *args], d)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_cli_tst_scores_with_unknown_question_names_file_and_row(pool_files):
    d = pool_files
    bad = d / "tst.csv"
    pd.DataFrame({"question_id": ["sim-000000", "nope"], "tst_s_minus_chance": [0.1, 0.9]}).to_csv(bad, index=False)
    p = _cli(["-q", str(d / "questions.parquet"), "-r", str(d / "runs.parquet"), "--tst-scores", str(bad),
              "--out", str(d / "never2")], d)
    assert p.returncode == 2
    assert "tst.csv" in p.stderr and "row 2" in p.stderr and "question_id" in p.stderr


@pytest.mark.slow
def test_bundled_example_end_to_end(tmp_path):
    """MATH-Vision (11 models, a pool-level blind arm): what curation reaches, with intervals."""
    out = tmp_path / "mathv"
    p = _cli(["--target-size", "1000", "--n-boot", "200", "--no-figures", "--out", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())["curation"]
    assert s["n_before"] == 3040 and s["n_after"] == 1000
    assert s["heldout_design"]["folds"] == 11 and sum(s["heldout_design"]["models_per_fold"]) == 11
    assert s["image_dependency"]["computed"]
    # 11 models: leave-one-model-out, no fold-level rho
    assert s["heldout_design"]["mode"] == "leave_one_model_out" and s["heldout_spearman_rho"] is None
    assert len(s["heldout_lomo"]["rank_displacement"]) == 11
    assert "ibp" in s["baselines"]  # 3,040 items: the IBP baseline runs by default
    assert s["versus_random"].startswith(("better than random", "worse than random", "not distinguishable"))
    card = (out / "README.md").read_text()
    assert card.split("\n# ")[1].split("\n\n")[1].startswith("**Versus random subsets")
    assert s["score_estimation"]["n_models"] == 11


@pytest.mark.slow
def test_benchmark_smoke_runs():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "curate.py"), "--smoke"], capture_output=True,
                       text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "heldout_spearman_rho" in p.stdout and "time" in p.stdout


def test_fold_findings_hook_matches_the_full_audit_tables():
    """audit.run_detectors (curation's per-fold re-audit: primary field only, no calibration or summary)
    gives the same per-question tables as run_audit in the same cheap mode, on a fold's frame."""
    from audit_hub.curate.findings import audit_findings
    from audit_hub.engine.run import AuditConfig, run_audit, run_detectors

    frame = simulate_pool(400, 8, seed=5).without_models(["m00", "m03"])
    fnd = audit_findings(frame, seed=2)
    names = tuple(c for c in fnd.table.columns if c.startswith("is_"))
    assert names, "no detector columns"
    dets = tuple(n[3:-6] for n in names if n.endswith("_issue"))
    from audit_hub import detectors as reg

    params = {}
    for d in dets:
        p = dict(reg.get(d).findings_overrides)
        if "n_permutations" in p or "n_permutations" in reg.get(d).audit_params:
            p["n_permutations"] = 0
        params[d] = p
    full = run_audit(frame, AuditConfig(seed=2, n_permutations=0, run_calibration=False, detectors=dets, params=params))
    lean, skipped, field = run_detectors(frame, dets, seed=2, params=params)
    assert field == full.primary_field and not skipped
    for d in dets:
        pd.testing.assert_frame_equal(lean[d].per_question, full.results[d].per_question)
        for c in lean[d].per_question.columns.drop("question_id"):  # what curation joins
            np.testing.assert_array_equal(fnd.table[c].to_numpy(), lean[d].per_question[c].to_numpy())
    assert fnd.models_full == full.summary["models"]["full"] and "m03" not in fnd.models_full
    # the flags curation's stages read are the ones the audit publishes with its own defaults (the label
    # model's held-out check included): the findings mode switches off summary extras only
    label = reg.by_role("label_conflict")
    published = run_audit(frame, AuditConfig(seed=2, n_permutations=0, run_calibration=False, detectors=(label,)))
    for c in (f"is_{label}_issue", f"{label}_severity", f"{label}_p_gold_wrong"):
        np.testing.assert_array_equal(fnd.table[c].to_numpy(), published.results[label].per_question[c].to_numpy())


def test_one_pass_bootstrap_and_shared_random_draws_match_per_split_computation():
    """The bootstrap of every split in one matrix product per batch equals each split's own replicates;
    the random-subset accuracies shared by the splits equal the per-draw accuracies."""
    from audit_hub.curate import baselines as bl
    from audit_hub.curate import pipeline as pl
    from audit_hub.curate.measures import boot_weights, kendall_tau_b, spearman, weighted_accuracy

    frame = simulate_pool(300, 9, seed=1)
    pool = pl._Pool(frame, "hit")
    cfg = CurateConfig(n_boot=150, seed=4)
    rng = np.random.default_rng(0)
    ref = rng.random(3)
    jobs = [(rng.random(pool.Q) < 0.4, np.arange(9), None), (rng.random(pool.Q) < 0.3, np.array([1, 4, 7]), None),
            (rng.random(pool.Q) < 0.5, np.array([0, 2, 8]), ref)]
    got = pl._boot_rho(pool, jobs, cfg)
    w = np.concatenate(boot_weights((4, 7), pool.Q, 150)).astype(np.float64)
    for (mask, test, r), (rho, tau) in zip(jobs, got):
        cur = weighted_accuracy(w * mask[None, :], pool.right[:, test], pool.known[:, test])
        full = weighted_accuracy(w, pool.right[:, test], pool.known[:, test]) if r is None else np.broadcast_to(r, cur.shape)
        assert rho.shape == (150,)
        np.testing.assert_allclose(rho, spearman(cur, full), atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(tau, kendall_tau_b(cur, full), atol=1e-12, equal_nan=True)
    acc = pool.random_accuracy(90, 200, 4)
    masks = bl.stratified_random(pool.cat, 90, 200, np.random.default_rng([4, 5]))
    assert (masks.sum(axis=1) == 90).all()
    np.testing.assert_allclose(acc, weighted_accuracy(masks, pool.right, pool.known), atol=1e-12)


def _without_timings(x):
    """A summary with its clock readings removed (the only part that differs between runs)."""
    if isinstance(x, dict):
        return {k: _without_timings(v) for k, v in x.items() if k not in ("timings_s", "seconds_building_pool")}
    if isinstance(x, list):
        return [_without_timings(v) for v in x]
    return x


def _same(a, b) -> None:
    assert json.dumps(_without_timings(a), sort_keys=True, default=str) == \
        json.dumps(_without_timings(b), sort_keys=True, default=str)


@pytest.fixture(scope="module")
def serial_and_worker():
    """One pool (with a newest-models split) curated in this process alone, and with the worker process (the
    size rule lowered so that this small pool uses it)."""
    from audit_hub.curate import pipeline
    from audit_hub.engine.worker import worker_helps

    frame = simulate_pool(600, 14, seed=5)
    cfg = CurateConfig(target_size=200, junk_fractions=(0.5,), **FAST)
    dates = frame.meta["model_dates"]
    serial = run_curation(frame, cfg, model_dates=dates)
    old = pipeline.WORKER_MIN_CELLS
    pipeline.WORKER_MIN_CELLS = 0
    try:
        par = run_curation(frame, cfg, model_dates=dates, parallel=True)
    finally:
        pipeline.WORKER_MIN_CELLS = old
    return frame, cfg, dates, serial, par, worker_helps()


def test_worker_process_changes_no_number_of_the_curation(serial_and_worker):
    """`benchaudit curate` runs the junk stage and some held-out splits in a worker process on a large pool: every
    figure, every kept item and every table is the one the single process gives."""
    _frame, _cfg, _dates, serial, par, helps = serial_and_worker
    if helps:  # a second CPU: the worker ran the junk stage (the main process then waited for it, or not at all)
        assert "junk_wait" in par.timings and "junk_wait" not in serial.timings
    _same(serial.summary, par.summary)
    assert np.array_equal(serial.kept, par.kept)
    assert serial.removed.equals(par.removed) and serial.findings.equals(par.findings)
    pd.testing.assert_frame_equal(serial.model_scores, par.model_scores)


class _LostWorker:
    """A worker that takes the first claim of every round of splits and the junk job, then dies with them."""

    def __init__(self):
        from audit_hub.engine.calibration import _LocalCounter

        self.counter = _LocalCounter()
        self.submitted = []

    def submit(self, fn, *args):
        self.submitted.append(fn.__name__)
        if fn.__name__ == "_splits_job":
            with self.counter.get_lock():
                self.counter.value += 1  # claimed split 0, never to hand it back
        return object()

    def wait(self, job) -> bool:
        return False

    def close(self) -> None:
        pass


def test_work_a_dead_worker_claimed_is_done_here(serial_and_worker, monkeypatch):
    """A worker that dies (an OOM kill) loses the junk stage and the split it claimed: this process runs them, and the
    result is the single process's."""
    from audit_hub.curate import pipeline

    frame, cfg, dates, serial, _par, _helps = serial_and_worker
    lost = _LostWorker()
    monkeypatch.setattr(pipeline, "WORKER_MIN_CELLS", 0)
    monkeypatch.setattr("audit_hub.engine.worker.start_worker", lambda enabled=True: lost)
    res = run_curation(frame, cfg, model_dates=dates, parallel=True)
    assert lost.submitted == ["_junk_job", "_splits_job"]
    _same(serial.summary, res.summary)
    assert np.array_equal(serial.kept, res.kept)


def test_kmeans_anchors_do_not_change_with_the_openmp_thread_count():
    """k-means anchors (the kmeans_anchors candidate and baseline, the anchor score estimators) are the same on one
    OpenMP thread and on two: before, Lloyd's per-thread sums made them follow the machine's CPU count, and a second
    `curate` in one process (scikit-learn's runtime loaded before the threadpool limit) gave other anchors."""
    import sklearn.cluster  # noqa: F401  (loaded first: threadpoolctl limits only the runtimes already loaded)
    from threadpoolctl import threadpool_limits

    from audit_hub.curate.baselines import kmeans_anchors

    frame = simulate_pool(600, 14, seed=5)
    x = frame.correctness("full", "hit", frame.models_in("full"))
    right, known = (x == 1).astype(np.float64), (x >= 0).astype(np.float64)
    out = []
    for n in (1, 2):
        with threadpool_limits(limits=n, user_api="openmp"):
            out.append(kmeans_anchors(right[:, :9], known[:, :9], 200, 0))
    assert (out[0] > 0).sum() == 200
    assert np.array_equal(out[0], out[1])


def test_a_model_that_covers_few_items_leaves_the_rankings_and_changes_nothing_else():
    """A pool of 15 simulated models with one run stopped after 60 of 1,500 items: that model would be ranked on
    60 items on the whole benchmark and on 18 of the curated ones. It leaves the ranking pool (named in the summary
    and the card) and the curation equals the one of the pool without it, figure for figure."""
    from audit_hub.curate.output import left_out_note

    frame = simulate_pool(1500, 15, seed=3)
    cut = frame.models[4]
    runs = frame.runs_table()
    drop = np.flatnonzero((runs["model"] == cut).to_numpy())[60:]
    partial = AuditFrame.from_tables(frame.questions_table(), runs.drop(index=runs.index[drop]))
    without = AuditFrame.from_tables(frame.questions_table(), runs[runs["model"] != cut])
    cfg = CurateConfig(target_size=450, junk_fractions=(), method="point_biserial", **FAST)
    a, b = run_curation(partial, cfg).summary, run_curation(without, cfg).summary
    assert a["models_left_out"] == [{"model": cut, "items_known": 60}] and b["models_left_out"] == []
    assert a["models"] == b["models"] and cut not in a["models"]
    for key in ("n_after", "spearman_rho", "heldout_spearman_rho", "random_subset_rho_mean", "versus_random"):
        assert a[key] == b[key], key
    assert left_out_note(a).startswith("models left out of the rankings for covering few items")
    assert left_out_note(a).endswith(f"{cut} (known on 60 of 1,500 items)")
    # a model missing a few items stays in
    few = AuditFrame.from_tables(frame.questions_table(), runs.drop(index=runs.index[drop[:5]]))
    assert run_curation(few, cfg).summary["models_left_out"] == []


def test_a_curated_folder_is_audited_with_the_full_benchmarks_runs(tmp_path):
    """The curate-and-push review: a curated folder could not be audited with its source runs without filtering
    them by hand. Given as --questions, the folder `curate` wrote keeps its questions' rows and says how many
    rows it set aside; another questions table with unknown IDs is still refused."""
    import audit_hub as ba
    from audit_hub.errors import InputError

    data = Path(ba.__file__).parent / "data"
    cur = ba.api.curate(target_size=1000, n_boot=50, figures=False, parallel=False).save(tmp_path / "cur")
    res = ba.audit(questions=str(cur), runs=str(data / "mathv_runs.parquet"), calibration_sims=0, figures=False,
                   parallel=False)
    assert res.frame.n_questions == 1000 and len(res.frame.runs) == 1000 * 12
    notes = " ".join(res.frame.meta["reader_notes"])
    assert "the questions are a benchmark `benchaudit curate` made: 24,480 run rows of 2,040 questions it left out " \
           "are not audited" in notes
    q = pd.read_parquet(next((cur / "data").glob("test-*.parquet")))
    q.to_parquet(tmp_path / "subset.parquet", index=False)
    with pytest.raises(InputError, match="2,040 question IDs in the runs are not in the questions table"):
        ba.audit(questions=str(tmp_path / "subset.parquet"), runs=str(data / "mathv_runs.parquet"),
                 calibration_sims=0, figures=False, parallel=False)
