"""Served backend (``--backend openai``) against a local OpenAI-compatible stub server (tests/openai_stub.py)."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import StubServer  # noqa: E402

from audit_hub.blind.__main__ import main as blind_main  # noqa: E402
from audit_hub.errors import InputError  # noqa: E402

pytest.importorskip("openai")

KEY = "sk-test-7f3a9c1e5b2d4f6a8c0e"
LETTERS = "ABCDEFGHIJ"


def make_questions(n_mc: int = 12, n_yn: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n_mc):
        k = 3 + i % 3
        rows.append({"question_id": f"q{i:03d}", "question": f"Which shape is meant here? id=q{i:03d}",
                     "options": [f"shape {x}" for x in range(k)], "answer": LETTERS[int(rng.integers(0, k))],
                     "answer_type": "mc", "category": "c", "hint": None})
    for i in range(n_yn):
        rows.append({"question_id": f"y{i:03d}", "question": f"Is the circle red? id=y{i:03d}", "options": [],
                     "answer": "yes" if i % 2 == 0 else "no", "answer_type": "yesno", "category": "y", "hint": None})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def qfile(tmp_path_factory):
    p = tmp_path_factory.mktemp("served") / "q.parquet"
    make_questions().to_parquet(p)
    return str(p)


def cfg(qfile, out, base_url, **kw):
    from audit_hub.blind.runner import BlindConfig

    base = {"model": "stub-model", "questions": qfile, "out": str(out), "backend": "openai", "base_url": base_url,
            "model_name": "stub", "progress": False, "concurrency": 4, "request_timeout": 0.5, "max_retries": 3,
            "retry_base_s": 0.05}
    base.update(kw)
    return BlindConfig(**base)


def _lse(xs):
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _no_key_under(out: Path):
    for f in out.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_faults_are_retried_and_every_answer_arrives(qfile, tmp_path, monkeypatch):
    from audit_hub.blind.runner import run_blind

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    plan = {"q000": ["429"], "q001": ["500", "500"], "q002": ["stall"], "q003": ["malformed"]}
    answers = {"q005": [(" C", -0.5), ("C", -1.5), ("The", -1.0), ("B", -2.0)]}  # 5 options; A, D, E missing
    with StubServer(KEY, plan=plan, no_logprobs={"q004"}, answers=answers) as stub:
        res = run_blind(cfg(qfile, tmp_path / "out", stub.base_url))
    out = tmp_path / "out"
    df = res.table.set_index("question_id")
    q = make_questions().set_index("question_id")
    assert list(df.index) == list(q.index)  # every answer arrived, in questions-table order
    reqs = stub.by_question()
    # each fault cost exactly one extra request; Retry-After: 1 was honoured
    assert {k: len(v) for k, v in reqs.items() if len(v) > 1} == {"q000": 2, "q001": 3, "q002": 2, "q003": 2}
    assert reqs["q000"][1]["t"] - reqs["q000"][0]["t"] >= 0.99
    assert reqs["q002"][1]["t"] - reqs["q002"][0]["t"] < 2.5  # the stalled request was timed out, not waited on
    # a blind request never carries an image; the prompt is the plain-string user turn
    for r in stub.requests:
        assert isinstance(r["body"]["messages"][0]["content"], str) and len(r["body"]["messages"]) == 1
        assert "image" not in json.dumps(r["body"]).lower()
        assert r["body"]["temperature"] == 0 and r["body"]["logprobs"] is True and r["body"]["top_logprobs"] == 20
    # scoring from top_logprobs, restricted to the option letters (hand-computed for q005)
    assert df.loc["q005", "scoring"] == "top_logprobs" and df.loc["q005", "answer"] == "C"
    assert list(df.loc["q005", "options_missing"]) == ["A", "D", "E"]
    lp = df.loc["q005", "option_logprobs"]
    c, b = _lse([-0.5, -1.5]), -2.0
    assert np.isnan([lp[0], lp[3], lp[4]]).all()  # null in Parquet: below the top-k, not estimated
    np.testing.assert_allclose([lp[1], lp[2]], [b - _lse([b, c]), c - _lse([b, c])], atol=1e-12)
    assert df.loc["q005", "letter_mass"] == pytest.approx(math.exp(-0.5) + math.exp(-1.5) + math.exp(-2.0))
    for qid in ["q000", "q001", "q006", "q011"]:
        k = len(q.loc[qid, "options"])
        j = sum(map(ord, qid)) % k
        assert df.loc[qid, "answer"] == LETTERS[j] and df.loc[qid, "scoring"] == "top_logprobs"
        assert len(df.loc[qid, "options_missing"]) == 0
        assert np.exp(np.asarray(df.loc[qid, "option_logprobs"], float)).sum() == pytest.approx(1.0)
        assert bool(df.loc[qid, "hit_exact"]) == (LETTERS[j] == q.loc[qid, "answer"])
    assert df.loc["y000", "answer"] == "yes" and df.loc["y000", "prediction"] == "Yes"
    np.testing.assert_allclose(df.loc["y000", "option_logprobs"],
                               [-0.3 - _lse([-0.3, _lse([-1.6, -2.5])]), _lse([-1.6, -2.5]) - _lse([-0.3, _lse([-1.6, -2.5])])])
    # no logprobs in the response: generated text parsed by the exact-match parser
    assert df.loc["q004", "scoring"] == "generate" and df.loc["q004", "prediction"].startswith("The answer is (")
    assert df.loc["q004", "answer"] == df.loc["q004", "prediction"][15]
    # manifest: base URL, server-reported model, usage, request count; never the key
    rc = json.loads((out / "run_config.json").read_text())
    assert rc["base_url"] == stub.base_url and rc["base_urls"] == [stub.base_url]
    assert rc["fingerprint"]["backend"] == "openai" and rc["fingerprint"]["model"] == "stub-model"
    assert rc["served"]["requests"] == len(stub.requests) == 14 + 5
    assert rc["served"]["server_models"] == ["stub-model-2026-01"]
    assert rc["served"]["usage"] == {"prompt_tokens": 40 * 14, "completion_tokens": 2 * 14, "total_tokens": 42 * 14}
    assert rc["image_mode"] == "none" and rc["prompt_style"] == "vlmevalkit"
    assert "no image was sent" in (out / "README.md").read_text()
    _no_key_under(out)


def test_permanent_failures_exit_nonzero_and_rerun_asks_only_for_missing(qfile, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "out"
    args = ["--backend", "openai", "--base-url", None, "--model", "stub-model", "--questions", qfile, "--out",
            str(out), "--model-name", "stub", "--no-progress", "--max-retries", "1", "--concurrency", "3"]
    with StubServer(KEY, plan={"q007": ["down"], "y001": ["down"]}) as stub:
        args[3] = stub.base_url
        rc = blind_main(args)
        err = capsys.readouterr().err
        assert rc == 1
        assert "2 of 14 questions failed after 1 retries" in err and "HTTP 500" in err
        assert "rerun the same command" in err and KEY not in err
        assert len(stub.by_question()["q007"]) == 2  # first try + one retry
        assert not (out / "data").exists()  # an incomplete run is not published as complete
        saved = pd.concat([pd.read_parquet(p) for p in (out / "shards").glob("rank0-*.parquet")])
        assert sorted(saved["question_id"]) == sorted(set(make_questions()["question_id"]) - {"q007", "y001"})
        n_first = len(stub.requests)
        stub.plan.clear()  # the server recovers
        assert blind_main(args) == 0
        done = capsys.readouterr().out
        # issue 27: the summary line says its settings in words, never a Python repr
        assert "blind: 14 questions" in done and "scoring " in done and "{'" not in done and "%" in done
        second = stub.requests[n_first:]
        assert sorted(r["qid"] for r in second) == ["q007", "y001"]  # only the missing questions
    merged = pd.read_parquet(out / "data" / "blind-00000-of-00001.parquet")
    assert list(merged["question_id"]) == list(make_questions()["question_id"])
    rc = json.loads((out / "run_config.json").read_text())
    assert rc["served"]["requests"] == len(stub.requests)  # summed over both runs
    _no_key_under(out)


def test_wrong_key_is_reported_once_without_a_retry_storm(qfile, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MY_KEY", "sk-wrong-0000")
    out = tmp_path / "out"
    with StubServer(KEY) as stub:
        rc = blind_main(["--backend", "openai", "--base-url", stub.base_url, "--model", "stub-model", "--questions",
                         qfile, "--out", str(out), "--api-key-env", "MY_KEY", "--no-progress", "--concurrency", "4"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1
    assert "rejected the API key in $MY_KEY (HTTP 401" in err and "no further requests" in err
    assert "sk-wrong" not in err
    assert 1 <= len(stub.requests) <= 4  # at most the requests already in flight; none retried
    assert not out.exists()  # nothing came back, nothing left behind


def test_server_without_logprobs_support_is_asked_without_them(qfile, tmp_path, monkeypatch):
    from audit_hub.blind.runner import run_blind

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with StubServer(KEY, reject_logprobs=True) as stub:
        res = run_blind(cfg(qfile, tmp_path / "out", stub.base_url, concurrency=1, limit=5))
    assert set(res.table["scoring"]) == {"generate"}
    assert len(stub.requests) == 6  # one 400 naming logprobs, then never asked again
    assert all("logprobs" not in r["body"] for r in stub.requests[1:])
    rc = json.loads((tmp_path / "out" / "run_config.json").read_text())
    assert rc["served"]["adaptations"] == ["no logprobs (rejected by the server)"]


@pytest.mark.parametrize("argv, env, match", [
    (["--backend", "openai"], {"OPENAI_API_KEY": KEY}, "needs --base-url"),
    (["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"], {}, "API key in the environment variable OPENAI_API_KEY"),
    (["--backend", "openai", "--base-url", "ftp://example.org/v1"], {"OPENAI_API_KEY": KEY}, "http:// or https://"),
    (["--backend", "openai", "--base-url", "localhost:8000"], {"OPENAI_API_KEY": KEY}, "http:// or https://"),
    (["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--image-mode", "blank"], {"OPENAI_API_KEY": KEY},
     "never sends an image"),
    (["--base-url", "http://127.0.0.1:9/v1"], {}, "--base-url is for --backend openai"),
    (["--prompt-style", "harness"], {}, "--prompt-style must be one of"),
])
def test_bad_served_input_is_one_line_exit_2_nothing_written(qfile, tmp_path, monkeypatch, capsys, argv, env, match):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "out"
    rc = blind_main(["--model", "m", "--questions", qfile, "--out", str(out), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and match in err, err
    assert not out.exists()


def test_base_url_credentials_are_dropped_and_backoff_honours_retry_after():
    from audit_hub.blind.served import backoff_s, clean_base_url, retry_after_s

    assert clean_base_url("https://user:pw@api.example.org:8443/v1/?api_key=abc#x") == "https://api.example.org:8443/v1"
    assert clean_base_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"

    class R:
        def __init__(self, h):
            self.headers = h

    class E(Exception):
        def __init__(self, h):
            self.response = R(h)

    assert retry_after_s(E({"retry-after": "7"})) == 7.0
    assert retry_after_s(E({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    assert retry_after_s(E({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # a date in the past
    assert retry_after_s(E({})) is None
    rng = random.Random(0)
    draws = [backoff_s(3, 1.0, rng, None) for _ in range(2000)]
    assert 0 <= min(draws) and max(draws) <= 8.0 and 3.5 < np.mean(draws) < 4.5  # full jitter on [0, 2^3]
    assert all(backoff_s(0, 1.0, rng, 5.0) >= 5.0 for _ in range(50))


def test_restricted_top_logprob_scoring_hand_computed():
    from audit_hub.blind.served import score_top_logprobs

    lps, missing, mass = score_top_logprobs([(" B", -0.5), ("B", -2.0), (" A", -2.5), (" the", -3.0)], list("ABC"),
                                            False)
    b = _lse([-0.5, -2.0])
    assert missing == ["C"] and lps[2] is None
    assert lps[0] == pytest.approx(-2.5 - _lse([-2.5, b])) and lps[1] == pytest.approx(b - _lse([-2.5, b]))
    assert mass == pytest.approx(math.exp(-0.5) + math.exp(-2.0) + math.exp(-2.5))
    assert score_top_logprobs([("The", -0.1)], list("ABC"), False) is None
    assert score_top_logprobs([(" YES", -0.2), ("no", -2.0)], ["yes", "no"], True)[1] == []
    with pytest.raises(InputError):
        from audit_hub.blind.runner import BlindConfig

        BlindConfig(model="m", questions="q", out="o", backend="openai", base_url="http://x", top_logprobs=50,
                    api_key_env="PATH").validate()
