"""Hostile local model folders for `benchaudit blind` (built by tests/tiny_model.py, nothing downloaded):
corrupt weights, chat templates that loop or explode, option letters that share one token. Each is refused
with one line and exit 2 before anything is written: no --out folder, no run_config.json, so that the
suggested fix (e.g. ``--mode generate``) then runs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_model import build_tiny_llama  # noqa: E402

N = 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return Path(build_tiny_llama(tmp_path_factory.mktemp("models") / "ok", chat_template=True, seed=1))


def _variant(tiny: Path, ws, name: str) -> Path:
    dst = ws.root.parent / "models" / name
    shutil.copytree(tiny, dst)
    return dst


def _questions(ws) -> str:
    rows = [{"question_id": f"q{i}", "question": f"Which colour is meant? id=q{i}", "options": ["red", "green", "blue"],
             "answer": "ABC"[i % 3], "answer_type": "mc", "hint": None} for i in range(N)]
    p = ws.root / "inputs" / "q.parquet"
    pd.DataFrame(rows).to_parquet(p)
    return str(p)


def _blind(ws, model: Path, *extra):
    q = _questions(ws)
    before = ws.snap()
    return before, ws.cli("blind", "--model", str(model), "--questions", q, "--out", "outb", "--cpu",
                          "--no-progress", *extra)


def _header(n: int, body: bytes) -> bytes:
    return n.to_bytes(8, "little") + body


BAD_WEIGHTS = {
    "header_length_beyond_file": _header(10**6, b"{not json" + b"\0" * 64),
    "header_not_json": _header(16, b"{not json at all"),
    "empty_file": b"",
    "header_offsets_beyond_data": _header(
        len(b'{"model.embed_tokens.weight":{"dtype":"F32","shape":[9999,32],"data_offsets":[0,1279872]}}'),
        b'{"model.embed_tokens.weight":{"dtype":"F32","shape":[9999,32],"data_offsets":[0,1279872]}}'),
}


@pytest.mark.parametrize("label", sorted(BAD_WEIGHTS))
def test_corrupt_safetensors_is_one_line_and_nothing_written(ws, tiny, label):
    model = _variant(tiny, ws, label)
    (model / "model.safetensors").write_bytes(BAD_WEIGHTS[label])
    before, res = _blind(ws, model)
    ws.check_refused(res, before, out="outb")
    assert "cannot load the weights" in res.error_lines[0] and "nothing written" in res.error_lines[0], res
    assert not (ws.root / "outb").exists()


LOOPING_TEMPLATES = {
    "nested_range_loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
                         "{{ messages[0]['content'] }}",
    "exploding_output": "{% for i in range(100000) %}{% for j in range(100) %}{{ 'xxxxxxxxxx' }}{% endfor %}"
                        "{% endfor %}{{ messages[0]['content'] }}",
    "loop_after_the_prompt": "{{ messages[0]['content'] }}{% for m in messages %}{% for i in range(100000) %}"
                             "{% for j in range(100000) %}{% endfor %}{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("label", sorted(LOOPING_TEMPLATES))
def test_a_chat_template_that_loops_is_stopped_and_refused(ws, tiny, label):
    model = _variant(tiny, ws, label)
    (model / "chat_template.jinja").write_text(LOOPING_TEMPLATES[label], encoding="utf-8")
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    cfg.pop("chat_template", None)
    (model / "tokenizer_config.json").write_text(json.dumps(cfg))
    before, res = _blind(ws, model)
    ws.check_refused(res, before, out="outb")
    line = res.error_lines[0]
    assert "the chat template" in line and ("ran longer than" in line or "emitted more than" in line), line


def test_a_prompt_template_that_loops_is_stopped_and_refused(ws, tiny):
    tpl = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ question }}"
    before, res = _blind(ws, tiny, "--prompt-template", tpl)
    ws.check_refused(res, before, out="outb")
    assert "--prompt-template ran longer than" in res.error_lines[0], res


@pytest.mark.parametrize("where", ["main_thread_alarm", "other_thread_tracer"])
def test_the_bound_stops_in_seconds_and_leaves_no_tracer(where):
    """template_bounds on its own, on both of its paths (a SIGALRM timer on the main thread, a trace function
    on the template's frames elsewhere): a nested loop stops at the bound, a normal template renders, too
    much output is refused, and the previous trace function and signal handler are restored."""
    import signal
    import threading
    import time

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from audit_hub.blind.prompt import template_bounds
    from audit_hub.errors import InputError

    def check():
        env = ImmutableSandboxedEnvironment()
        loop = env.from_string("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
        before, handler = sys.gettrace(), signal.getsignal(signal.SIGALRM)
        t0 = time.monotonic()
        with pytest.raises(InputError, match="ran longer than 0.3 s"):
            with template_bounds("the chat template", seconds=0.3):
                loop.render()
        assert time.monotonic() - t0 < 5
        assert sys.gettrace() is before and signal.getsignal(signal.SIGALRM) is handler
        with template_bounds("the chat template", seconds=0.3) as bound:
            bound["text"] = env.from_string("{{ a }}-{{ b }}").render(a=1, b=2)
        assert bound["text"] == "1-2"
        with pytest.raises(InputError, match="emitted more than 1,000 characters"):
            with template_bounds("the chat template", max_chars=1000) as bound:
                bound["text"] = env.from_string("{% for i in range(5000) %}x{% endfor %}").render()

    if where == "main_thread_alarm":
        check()
    else:
        errors = []
        th = threading.Thread(target=lambda: errors.append(None) if _try(check) else errors.append("failed"))
        th.start()
        th.join(60)
        assert errors == [None]


def _try(fn) -> bool:
    try:
        fn()
        return True
    except BaseException:  # noqa: BLE001 - reported by the caller's assert
        return False


def test_letters_sharing_one_token_write_nothing_and_generate_mode_then_runs(ws, tiny):
    """The reported case: option letters that share a token are refused (good) before run_config.json is
    written, so following the advice (--mode generate) runs instead of being refused as 'written by a
    different configuration'."""
    model = _variant(tiny, ws, "shared")
    tj = json.loads((model / "tokenizer.json").read_text())
    tj["normalizer"] = {"type": "Replace", "pattern": {"String": "B"}, "content": "A"}  # B encodes as A
    (model / "tokenizer.json").write_text(json.dumps(tj))
    before, res = _blind(ws, model)
    ws.check_refused(res, before, out="outb")
    assert "share token" in res.error_lines[0] and "--mode generate" in res.error_lines[0], res
    res = ws.cli("blind", "--model", str(model), "--questions", str(ws.root / "inputs" / "q.parquet"), "--out",
                 "outb", "--cpu", "--no-progress", "--mode", "generate")
    assert res.rc == 0, res
    assert len(pd.read_parquet(ws.root / "outb" / "data" / "blind-00000-of-00001.parquet")) == N
