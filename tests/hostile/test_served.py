"""Hostile OpenAI-compatible servers (`benchaudit blind --backend openai`), through the real command line
against tests/openai_stub.py: a server that echoes the API key into its answers, a body that never ends,
lone surrogates and malformed usage fields. Every case runs with the canary credentials of conftest.py in
the environment and checks that no secret (the canaries and the run's own key, whatever the variable is
called) reaches any byte of stdout, stderr or any file, and that nothing outside --out is touched."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from .conftest import all_bytes, assert_no_secret

pytest.importorskip("openai")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from openai_stub import StubServer  # noqa: E402

N = 6
KEYS = {"OPENAI_API_KEY": "sk-canaryOpenAIkey0123456789abcdef",  # the conftest canary
        "VLLM_CREDS": "canary-vllm-creds-55d1e2f0",               # a name scrub's patterns do not know
        "SERVE_PASS_X": "canary-serve-pass-0a9b8c7d6e"}


def _questions(ws) -> str:
    rows = [{"question_id": f"q{i}", "question": f"Which shape is meant? id=q{i}", "options": ["red", "green", "blue"],
             "answer": "ABC"[i % 3], "answer_type": "mc", "hint": None} for i in range(N)]
    p = ws.root / "inputs" / "served.parquet"
    pd.DataFrame(rows).to_parquet(p)
    return str(p)


def _args(ws, stub, out="outb", env="OPENAI_API_KEY", *extra):
    a = ["blind", "--backend", "openai", "--model", "stub-model", "--questions", _questions(ws), "--out", out,
         "--base-url", stub.base_url, "--no-progress", "--request-timeout", "2", "--max-retries", "1"]
    if env != "OPENAI_API_KEY":
        a += ["--api-key-env", env]
    return a + list(extra)


def _no_key_anywhere(ws, res, key: str) -> None:
    assert_no_secret(res.out, res.err, all_bytes(ws.root))
    for blob in (res.out.encode(), res.err.encode(), all_bytes(ws.root)):
        assert key.encode() not in blob, "the run's API key leaked"


@pytest.mark.parametrize("scope", ["one", "all"])
@pytest.mark.parametrize("env", sorted(KEYS))
def test_a_server_echoing_the_key_never_gets_it_written(ws, env, scope):
    """The reported case: the Authorization header in the answer text (and in the id and model fields) is
    removed from every answer before anything is written; run_config.json counts the redacted answers."""
    key = KEYS[env]
    ws.monkeypatch.setenv(env, key)
    qids = ["q1"] if scope == "one" else [f"q{i}" for i in range(N)]
    _questions(ws)
    before = ws.snap("outb")
    with StubServer(key, plan={q: ["forever", "echo_auth"] for q in qids}) as stub:
        res = ws.cli(*_args(ws, stub, env=env))
    assert res.rc == 0, res
    assert "Traceback" not in res.err
    _no_key_anywhere(ws, res, key)
    rc = json.loads((ws.root / "outb" / "run_config.json").read_text())
    assert rc["served"]["n_redacted"] == len(qids)
    df = pd.read_parquet(ws.root / "outb" / "data" / "blind-00000-of-00001.parquet")
    assert len(df) == N and df["prediction"].str.contains("***", regex=False).sum() == len(qids)
    assert f"{len(qids)} answer{'s' if len(qids) != 1 else ''} carried the API key" in res.out
    assert ws.snap("outb") == before


def test_a_body_that_never_ends_is_bounded_by_the_request_timeout(ws):
    """A 200 whose chunked body never ends: --request-timeout 2 --max-retries 1 bounds the whole request
    (body included); the question fails, the others are saved, exit 1 well before 45 s."""
    key = KEYS["OPENAI_API_KEY"]
    with StubServer(key, plan={"q2": ["forever", "drip"]}) as stub:
        t0 = time.monotonic()
        res = ws.cli(*_args(ws, stub))
        took = time.monotonic() - t0
    assert res.rc == 1, res
    assert took < 30, took
    assert len(res.error_lines) == 1 and "Traceback" not in res.err, res
    assert "q2" in res.error_lines[0] and "--request-timeout 2" in res.error_lines[0]
    shards = list((ws.root / "outb" / "shards").glob("rank*.parquet"))
    assert sum(len(pd.read_parquet(p)) for p in shards) == N - 1
    _no_key_anywhere(ws, res, key)


def test_a_body_that_never_ends_without_retries(ws):
    key = KEYS["OPENAI_API_KEY"]
    with StubServer(key, plan={"q0": ["forever", "drip"]}) as stub:
        t0 = time.monotonic()
        res = ws.cli(*_args(ws, stub)[:-2], "--max-retries", "0")
        took = time.monotonic() - t0
    assert res.rc == 1 and took < 20, (res, took)
    assert len(res.error_lines) == 1 and "0 retries" in res.error_lines[0]


MALFORMED = {
    "surrogate_in_text": ("surrogate", "not valid Unicode"),
    "usage_12abc": ("bad_usage", "usage.prompt_tokens is '12abc'"),
}


@pytest.mark.parametrize("label", sorted(MALFORMED))
def test_one_malformed_response_fails_its_question_not_the_run(ws, label):
    """Every request of q3 gets the malformed response: q3 fails after its retry (counted), exit 1, one line,
    the other answers saved; rerunning against a sound server requests only q3 and completes."""
    fault, words = MALFORMED[label]
    key = KEYS["OPENAI_API_KEY"]
    with StubServer(key, plan={"q3": ["forever", fault]}) as stub:
        res = ws.cli(*_args(ws, stub))
        asked = len(stub.by_question()["q3"])
    assert res.rc == 1, res
    assert len(res.error_lines) == 1 and "Traceback" not in res.err, res
    line = res.error_lines[0]
    assert "1 of 6 questions failed" in line and "q3" in line and words in line, line
    assert asked == 2  # the first request and its one retry
    shards = list((ws.root / "outb" / "shards").glob("rank*.parquet"))
    assert sorted(pd.concat([pd.read_parquet(p) for p in shards])["question_id"]) == ["q0", "q1", "q2", "q4", "q5"]
    _no_key_anywhere(ws, res, key)
    with StubServer(key) as stub:
        res2 = ws.cli(*_args(ws, stub))
        assert [r["qid"] for r in stub.requests] == ["q3"]
    assert res2.rc == 0, res2
    assert len(pd.read_parquet(ws.root / "outb" / "data" / "blind-00000-of-00001.parquet")) == N


@pytest.mark.parametrize("label", sorted(MALFORMED))
def test_a_malformed_response_once_is_retried_and_the_run_completes(ws, label):
    fault, _ = MALFORMED[label]
    key = KEYS["OPENAI_API_KEY"]
    with StubServer(key, plan={"q3": [fault]}) as stub:
        res = ws.cli(*_args(ws, stub))
        asked = len(stub.by_question()["q3"])
    assert res.rc == 0, res
    assert asked == 2
    rc = json.loads((ws.root / "outb" / "run_config.json").read_text())
    assert rc["served"]["retries"] == 1
    assert rc["served"]["usage"]["prompt_tokens"] == 40 * N  # the malformed count was not added


def test_checked_row_rejects_every_malformed_token_count():
    """The usage fields must be non-negative integers: strings, negatives, fractions and booleans are a
    malformed response of that question (unit check of the same function the runs above exercise)."""
    from audit_hub.blind.served import MalformedResponse, _token_count

    for bad in ("12abc", "12", -5, 1.5, True, [3], {"n": 1}):
        with pytest.raises(MalformedResponse, match="not a non-negative integer"):
            _token_count(bad, "prompt_tokens")
    assert _token_count(0, "total_tokens") == 0 and _token_count(None, "total_tokens") is None


def test_a_lone_surrogate_in_the_reported_model_name_is_malformed():
    from audit_hub.blind.served import MalformedResponse, _check_text

    with pytest.raises(MalformedResponse, match="model is not valid Unicode"):
        _check_text("stub-\ud800", "model")
    _check_text("stub-model \u00e9\U0001f600", "model")  # any valid text passes


def test_the_shard_writer_scrubs_every_text_field_of_local_and_served_rows(tmp_path, monkeypatch):
    """The one place rows are written (blind/shards.ShardWriter, local and served runs alike): a registered
    key (any variable name) and an environment secret are removed from every text field, and the rows
    changed are counted."""
    from audit_hub.blind import shards as sh
    from audit_hub.scrub import register_secret

    register_secret("canary-registered-key-31337")
    monkeypatch.setenv("SOME_API_KEY", "canary-env-key-424242")
    w = sh.ShardWriter(tmp_path, 0)
    w.add([{"question_id": "q0", "model": "m", "arm": "blind", "prediction": "key canary-registered-key-31337",
            "answer": "canary-env-key-424242", "scoring": "generate"},
           {"question_id": "q1", "model": "m", "arm": "blind", "prediction": "A", "answer": "A",
            "scoring": "generate"}])
    path = w.flush()
    assert w.redacted == 1
    got = pd.read_parquet(path)
    assert list(got["prediction"]) == ["key ***", "A"] and list(got["answer"]) == ["***", "A"]


def test_a_looping_prompt_template_is_refused_before_any_request_or_write(ws):
    """Served runs render their prompts through the same bound, before the output folder exists and before
    any request is sent."""
    key = KEYS["OPENAI_API_KEY"]
    tpl = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ question }}"
    _questions(ws)
    before = ws.snap()
    with StubServer(key) as stub:
        res = ws.cli(*_args(ws, stub), "--prompt-template", tpl)
        assert stub.requests == []
    ws.check_refused(res, before, out="outb")
    assert "--prompt-template ran longer than" in res.error_lines[0], res
