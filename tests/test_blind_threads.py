"""``--threads`` of the blind runner: the measured choice of CPU threads (audit_hub.blind.threads) and the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from audit_hub.blind.threads import ThreadChooser, candidate_counts, parse_threads  # noqa: E402
from audit_hub.errors import InputError  # noqa: E402


def drive(chooser: ThreadChooser, n_batches: int, cost, work: float = 100.0) -> list[int]:
    """Run ``n_batches`` through ``chooser``; ``cost(batch_index, threads)`` is the seconds per token."""
    counts = []
    for b in range(n_batches):
        n = chooser.next_count()
        counts.append(n)
        chooser.record(n, cost(b, n) * work, work)
    return counts


def test_candidate_counts_and_parse():
    assert candidate_counts(1) == [1]
    assert candidate_counts(2) == [1, 2]
    assert candidate_counts(6) == [1, 2, 4, 6]
    assert candidate_counts(16) == [1, 2, 4, 8, 16]
    assert parse_threads("auto") == "auto" and parse_threads(None) == "auto" and parse_threads(" AUTO ") == "auto"
    assert parse_threads("3") == 3 and parse_threads(2) == 2
    with pytest.raises(InputError, match=r"--threads must be 'auto' or a whole number, got 'many'"):
        parse_threads("many")
    with pytest.raises(InputError, match="--threads must be in the range 1..1024, got 0"):
        parse_threads("0")


def test_warm_up_probe_in_alternating_order_then_the_cheaper_count():
    """Batch 0 warms up on the default (the largest count) and is not timed; then 1, 2 | 2, 1; then the cheaper."""
    c = ThreadChooser([1, 2], probe_rounds=2, reprobe_every=5)
    seq = drive(c, 11, lambda b, n: 1.0 if n == 1 else 0.6)
    assert seq == [2, 1, 2, 2, 1, 2, 2, 2, 2, 2, 1]  # warm-up, probe, 5 chosen, the next probe starts
    assert c.chosen == 2
    assert c.probes == [{1: 1e6, 2: 0.6e6}]  # microseconds per token
    assert c.summary()["batches_per_count"] == {"1": 3, "2": 8}


def test_a_load_that_arrives_mid_run_is_followed_at_the_next_probe():
    """Two threads win until batch 20; from then on (a busy process beside the run) one thread does."""
    c = ThreadChooser([1, 2], probe_rounds=2, reprobe_every=10)

    def cost(b, n):
        return (0.6 if n == 2 else 1.0) if b < 20 else (2.0 if n == 2 else 1.0)

    seq = drive(c, 40, cost)
    assert seq[5:15] == [2] * 10  # after the first probe
    assert seq[15:19] == [1, 2, 2, 1]  # probe 2 (batches 15-18: still idle)
    assert seq[19:29] == [2] * 10
    assert seq[29:33] == [1, 2, 2, 1]  # probe 3 sees the load
    assert seq[33:] == [1] * 7 and c.chosen == 1
    assert [min(p, key=p.get) for p in c.probes] == [2, 2, 1]


def test_a_linear_drift_in_batch_cost_favours_no_count():
    """Longest-first batches get cheaper per batch; the alternating order cancels a linear drift (tie -> fewer)."""
    c = ThreadChooser([1, 2], probe_rounds=2, reprobe_every=100)
    drive(c, 5, lambda b, n: 10.0 - b)  # the same cost for both counts, falling by one per batch
    assert c.probes == [{1: 7.5e6, 2: 7.5e6}] and c.chosen == 1


def test_a_new_kind_warms_up_again_and_keeps_the_last_choice():
    c = ThreadChooser([1, 2, 4], probe_rounds=1, reprobe_every=100)
    drive(c, 4, lambda b, n: {1: 3.0, 2: 1.0, 4: 2.0}[n])
    assert c.chosen == 2
    c.new_kind()
    seq = drive(c, 4, lambda b, n: {1: 1.0, 2: 3.0, 4: 2.0}[n])
    assert seq == [2, 1, 2, 4] and c.chosen == 1  # warm-up on the last choice (not timed), then a fresh probe


def test_one_candidate_is_never_probed():
    c = ThreadChooser([1])
    assert drive(c, 6, lambda b, n: 1.0) == [1] * 6
    assert c.chosen == 1 and c.probes == []


# ------------------------------------------------------------------------------------------- the run

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from test_blind import make_questions
    from tiny_model import build_tiny_llama

    root = tmp_path_factory.mktemp("threads")
    model = build_tiny_llama(root / "model", seed=0, chat_template=True)
    qpath = root / "q.parquet"
    make_questions(n_mc=20, n_yn=4).to_parquet(qpath)
    return {"model": model, "questions": str(qpath)}


def run(tiny, out, **kw):
    from audit_hub.blind.runner import BlindConfig, run_blind

    return run_blind(BlindConfig(model=tiny["model"], questions=tiny["questions"], out=str(out), batch_size=1,
                                 progress=False, model_name="tiny", **kw))


def manifest_threads(out) -> dict:
    return json.loads((Path(out) / "manifest.json").read_text())["params"]["cpu_threads"]


def test_auto_and_fixed_counts_give_the_same_rows_and_say_what_ran(tiny, tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    one = run(tiny, tmp_path / "one", threads=1)
    assert torch.get_num_threads() == before  # a library caller's setting is given back
    assert manifest_threads(tmp_path / "one") == {"mode": "fixed", "threads": 1}
    auto = run(tiny, tmp_path / "auto")
    assert torch.get_num_threads() == before
    ct = manifest_threads(tmp_path / "auto")
    assert ct["mode"] == "auto" and ct["candidates"] == candidate_counts(before)
    assert sum(ct["batches_per_count"].values()) == 24  # every batch (batch size 1) ran on a recorded count
    if 2 * len(ct["candidates"]) + 1 <= 24 and len(ct["candidates"]) > 1:
        assert len(ct["probe_us_per_token"]) >= 1 and ct["chosen"] in ct["candidates"]
        assert all(set(p) == {str(c) for c in ct["candidates"]} for p in ct["probe_us_per_token"])
    pd.testing.assert_frame_equal(one.table, auto.table)


def test_omp_num_threads_set_by_the_user_is_kept(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run(tiny, tmp_path / "env")
    assert manifest_threads(tmp_path / "env") == {"mode": "OMP_NUM_THREADS", "threads": torch.get_num_threads()}


def test_a_bad_count_is_refused_before_anything_is_written(tiny, tmp_path):
    with pytest.raises(InputError, match="--threads"):
        run(tiny, tmp_path / "bad", threads="0")
    with pytest.raises(InputError, match="no effect with --backend openai"):
        run(tiny, tmp_path / "bad", threads=2, backend="openai", base_url="http://127.0.0.1:9/v1")
    assert not (tmp_path / "bad").exists()
