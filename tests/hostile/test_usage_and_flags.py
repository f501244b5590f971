"""Usage errors (with the typer version the project installs) and numeric option ranges: usage plus one
`error:` line naming the option and the allowed range, exit 2, no traceback, nothing written."""

from __future__ import annotations

import pytest

USAGE = {
    "unknown_option": ["audit", "--bogus"],
    "unknown_command": ["nocommand"],
    "seed_not_integer": ["audit", "--seed", "1.5"],
    "seed_text": ["audit", "--seed", "abc"],
    "missing_push_argument": ["push"],
    "missing_required_option_blind": ["blind", "--questions", "q.csv"],
    "missing_option_value": ["audit", "--out"],
    "tst_without_questions": ["tst"],
    "figures_flag_with_value": ["audit", "--no-figures=yes"],
    "metrics_unknown_subcommand": ["metrics", "frobnicate"],
    "extra_positional": ["audit", "stray"],
}


@pytest.mark.parametrize("label", sorted(USAGE))
def test_usage_error(ws, label):
    before = ws.snap()
    res = ws.cli(*USAGE[label])
    ws.check_refused(res, before, out=None, usage=True)
    assert res.err.splitlines()[0].startswith("Usage: "), res


# (args, option named in the message)
RANGES = {
    "seed_negative": (["audit", "--seed", "-1"], "--seed"),
    "seed_too_big": (["audit", "--seed", str(2**64)], "--seed"),
    "n_permutations_negative": (["audit", "--n-permutations", "-5"], "--n-permutations"),
    "n_permutations_zero": (["audit", "--n-permutations", "0"], "--n-permutations"),
    "n_permutations_terabytes": (["audit", "--n-permutations", "1000000000000"], "--n-permutations"),
    "calibration_sims_negative": (["audit", "--calibration-sims", "-1"], "--calibration-sims"),
    "tst_k_one": (["tst", "-q", "x.csv", "--k", "1"], "--k"),
    "tst_repeats_zero": (["tst", "-q", "x.csv", "--repeats", "0"], "--repeats"),
    "tst_n_estimators_zero": (["tst", "-q", "x.csv", "--n-estimators", "0"], "--n-estimators"),
    "tst_n_jobs_minus_two": (["tst", "-q", "x.csv", "--n-jobs", "-2"], "--n-jobs"),
    "prune_frac_above_one": (["prune", "-q", "x.csv", "--frac", "1.5"], "--frac"),
    "prune_step_zero": (["prune", "-q", "x.csv", "--step", "0"], "--step"),
    "prune_budget_negative": (["prune", "-q", "x.csv", "--budget", "-3"], "--budget"),
    "prune_threshold_nan": (["prune", "-q", "x.csv", "--threshold", "nan"], "--threshold"),
    "blind_batch_size_zero": (["blind", "-m", "m", "-q", "x.csv", "-o", "o", "--batch-size", "0"], "--batch-size"),
    "blind_max_new_tokens_negative": (["blind", "-m", "m", "-q", "x.csv", "-o", "o", "--max-new-tokens", "-1"],
                                      "--max-new-tokens"),
    "blind_limit_zero": (["blind", "-m", "m", "-q", "x.csv", "-o", "o", "--limit", "0"], "--limit"),
}


@pytest.mark.parametrize("label", sorted(RANGES))
def test_numeric_option_out_of_range(ws, label):
    args, opt = RANGES[label]
    before = ws.snap()
    res = ws.cli(*args)
    ws.check_refused(res, before, out=None, usage=True)
    line = res.error_lines[0]
    assert opt in line, line
    assert "allowed range" in line, line


def test_memory_estimate_refuses_before_allocating(ws, monkeypatch):
    import audit_hub.bounds as limits

    monkeypatch.setattr(limits, "available_memory", lambda: 64 << 20)
    before = ws.snap()
    res = ws.cli(*ws.audit_args("report")[:-5], "--n-permutations", "5000000", "--calibration-sims", "0",
                 "--no-figures")
    ws.check_refused(res, before)
    assert "--n-permutations 5000000 needs about" in res.error_lines[0], res


def test_help_is_not_an_error(ws):
    res = ws.cli("audit", "--help")
    assert res.rc == 0 and "Usage" in res.out and not res.error_lines
