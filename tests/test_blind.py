"""Blind runner, single process, CPU, offline (tiny random Llama built in the test)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny_model import build_tiny_llama  # noqa: E402

from audit_hub.blind.prompt import ChatFormatter, PromptBuilder, default_prompt  # noqa: E402
from audit_hub.errors import InputError  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")


def make_questions(n_mc: int = 12, n_yn: int = 3, seed: int = 0, long_every: int = 0) -> pd.DataFrame:
    """Questions with 2..5 options, optional hints, yes/no items; varied lengths."""
    rng = np.random.default_rng(seed)
    words = "red blue green circle square triangle left right top bottom area angle length".split()
    rows = []
    for i in range(n_mc):
        k = int(rng.integers(2, 6))
        q = " ".join(rng.choice(words, size=int(rng.integers(3, 20)))) + f" number {i}?"
        if long_every and i % long_every == 0:
            q = q + " " + " ".join(rng.choice(words, size=120))
        rows.append({"question_id": f"q{i:03d}", "question": q,
                     "options": [" ".join(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(k)],
                     "answer": "ABCDE"[int(rng.integers(0, k))], "answer_type": "mc", "category": "c",
                     "hint": ("the figure is small" if i % 3 == 0 else None)})
    for i in range(n_yn):
        rows.append({"question_id": f"y{i:03d}", "question": f"Is the {words[i]} shape on the left?", "options": [],
                     "answer": "yes" if i % 2 == 0 else "no", "answer_type": "yesno", "category": "y", "hint": None})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("blind")
    model = build_tiny_llama(root / "model", seed=0, chat_template=True)
    plain = build_tiny_llama(root / "plain", seed=1, chat_template=False)
    qpath = root / "q.parquet"
    make_questions().to_parquet(qpath)
    return {"root": root, "model": model, "plain": plain, "questions": str(qpath)}


def cfg(tiny, out, **kw):
    from audit_hub.blind.runner import BlindConfig

    base = {"model": tiny["model"], "questions": tiny["questions"], "out": str(out), "batch_size": 4,
            "progress": False, "model_name": "tiny"}
    base.update(kw)
    return BlindConfig(**base)


# ------------------------------------------------------------------------------------------- prompts
def test_default_prompt_is_vlmevalkit_mcq_without_image():
    p = default_prompt("How many?", ["one", "two", "three"], "mc", hint="Count them")
    assert p == ("Hint: Count them\nQuestion: How many?\nOptions:\nA. one\nB. two\nC. three\n"
                 "Please select the correct answer from the options above. \n")
    assert default_prompt("How many?", ["x", "y"], "mc", hint=None).startswith("Question: How many?\nOptions:\nA. x\n")
    assert default_prompt("Is it red?", [], "yesno", hint=float("nan")) == "Is it red?\nPlease answer yes or no."
    assert default_prompt("Is it red? Please answer yes or no.", [], "yesno") == "Is it red? Please answer yes or no."
    assert default_prompt("Area?", [], "numeric").endswith("Answer the question using a single word or phrase.")


FIXTURE = Path(__file__).parent / "fixtures" / "blind" / "harness_prompts.json"


def test_prompt_styles_equal_the_harnesses_own_text():
    """tests/fixtures/blind/harness_prompts.json was produced by VLMEvalKit's build_prompt methods and
    lmms-eval's doc_to_text functions (provenance inside the file)."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert data["provenance"]["vlmevalkit"]["commit"] and data["provenance"]["lmms-eval"]["version"]
    n = 0
    for q in data["questions"]:
        for style, expected in q["expected"].items():
            got = default_prompt(q["question"], q["options"], q["answer_type"], q["hint"], style)
            assert got == expected, (q["question_id"], style)
            n += 1
    assert n == 14
    assert {s for q in data["questions"] for s in q["expected"]} == {"vlmevalkit", "lmms-eval", "lmms-eval-mmstar"}
    plain = default_prompt("Which?", ["x", "y"], "mc", "h", "plain")
    assert plain == "h\nQuestion: Which?\nA. x\nB. y\nAnswer:"
    with pytest.raises(InputError, match="--prompt-style"):
        default_prompt("Which?", ["x"], "mc", None, "harness")
    assert len({PromptBuilder(None, s).sha256 for s in ("vlmevalkit", "lmms-eval", "plain")}) == 3


def test_prompt_templates_format_jinja_and_errors(tmp_path):
    fmt = PromptBuilder.from_option("Q: {question}\n{options}\nPick one of {letters}.")
    assert fmt.render("Which?", ["a", "b"], "mc") == "Q: Which?\nA. a\nB. b\nPick one of A, B."
    jin = PromptBuilder.from_option("{% if hint %}H={{ hint }} {% endif %}{{ question }} [{{ letters }}]")
    assert jin.is_jinja
    assert jin.render("Which?", ["a", "b", "c"], "mc", hint="h") == "H=h Which? [A, B, C]"
    assert jin.render("Which?", ["a", "b"], "mc") == "Which? [A, B]"
    f = tmp_path / "t.txt"
    f.write_text("From file: {question}", encoding="utf-8")
    assert PromptBuilder.from_option(str(f)).render("x", [], "free") == "From file: x"
    assert fmt.sha256 != jin.sha256 != PromptBuilder(None).sha256
    with pytest.raises(InputError, match="unknown_field"):
        PromptBuilder.from_option("{unknown_field}").render("x", [], "free", question_id="q1")
    with pytest.raises(InputError, match="q7"):
        PromptBuilder.from_option("{{ nope }}").render("x", [], "free", question_id="q7")


def test_chat_template_applied_with_generation_prompt(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny["model"])
    chat = ChatFormatter(tok, enabled=True)
    assert chat.active
    assert chat("hello") == "<s><|user|>\nhello<|end|>\n<|assistant|>\n"
    assert ChatFormatter(tok, enabled=False)("hello") == "hello"
    plain = AutoTokenizer.from_pretrained(tiny["plain"])
    assert not ChatFormatter(plain).active


def test_letter_tokens_cover_both_forms(tiny):
    from transformers import AutoTokenizer

    from audit_hub.blind.scoring import AnswerTokens

    tok = AutoTokenizer.from_pretrained(tiny["model"])
    at = AnswerTokens.letters(tok, 5)
    for c, g in zip("ABCDE", at.groups):
        assert set(g) == {tok.encode(c, add_special_tokens=False)[0], tok.encode(" " + c, add_special_tokens=False)[0]}
        assert len(g) == 2
    yn = AnswerTokens.yes_no(tok)
    assert tok.encode(" Yes", add_special_tokens=False)[0] in yn.groups[0]
    assert set(yn.groups[0]) == {362, 418, 437} and set(yn.groups[1]) == {361, 485}  # multi-token forms dropped


# ------------------------------------------------------------------------------------------- logprob
def _reference_option_logprobs(model, tok, text: str, k: int, forms_by_answer: list[list[str]], chat: bool):
    """Straightforward per-option scoring: one unpadded forward pass per (option, token form),
    reading log P(form | prompt) as a continuation; forms of one answer combined by log-sum-exp."""
    ids = tok(text, add_special_tokens=not chat)["input_ids"]
    per_answer = []
    for forms in forms_by_answer[:k]:
        lps = []
        for f in forms:
            t = tok.encode(f, add_special_tokens=False)
            assert len(t) == 1
            seq = torch.tensor([ids + t])
            with torch.no_grad():
                logits = model(input_ids=seq).logits[0, -2].double()
            lps.append(float(torch.log_softmax(logits, -1)[t[0]]))
        per_answer.append(float(np.logaddexp.reduce(lps)))
    a = np.array(per_answer)
    return a - np.logaddexp.reduce(a)


@pytest.mark.parametrize("which", ["model", "plain"])
def test_logprob_equals_per_option_reference(tiny, tmp_path, which):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from audit_hub.blind.runner import run_blind

    res = run_blind(cfg(tiny, tmp_path / "out", model=tiny[which], chat_template=which == "model"))
    df = res.table.set_index("question_id")
    q = make_questions()
    assert sorted(df.index) == sorted(q["question_id"])
    model = AutoModelForCausalLM.from_pretrained(tiny[which], dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny[which])
    chat = ChatFormatter(tok, enabled=True)
    predicted = []
    for _, r in q.iterrows():
        text = chat(default_prompt(r["question"], r["options"], r["answer_type"], r["hint"]))
        if r["answer_type"] == "mc":
            k = len(r["options"])
            forms = [[c, " " + c] for c in "ABCDEFGH"]
            labels = list("ABCDEFGH"[:k])
        else:
            k = 2
            forms = [[f for f in ("Yes", " Yes", "yes", " yes", "YES", " YES")
                      if len(tok.encode(f, add_special_tokens=False)) == 1],
                     [f for f in ("No", " No", "no", " no", "NO", " NO")
                      if len(tok.encode(f, add_special_tokens=False)) == 1]]
            labels = ["yes", "no"]
        ref = _reference_option_logprobs(model, tok, text, k, forms, chat.active)
        got = np.asarray(df.loc[r["question_id"], "option_logprobs"], dtype=float)
        assert got.shape == (k,)
        np.testing.assert_allclose(got, ref, atol=2e-5)
        assert math.isclose(float(np.exp(got).sum()), 1.0, abs_tol=1e-9)
        assert df.loc[r["question_id"], "answer"] == labels[int(np.argmax(ref))]
        g = labels.index(r["answer"])
        assert math.isclose(df.loc[r["question_id"], "gold_prob"], float(np.exp(ref[g])), abs_tol=2e-5)
        assert bool(df.loc[r["question_id"], "hit_exact"]) == (labels[int(np.argmax(ref))] == r["answer"])
        predicted.append(df.loc[r["question_id"], "answer"])
    assert set(df["arm"]) == {"blind"} and set(df["model"]) == {"tiny"}
    assert set(df["scoring"]) == {"logprob"}
    assert ((df["letter_mass"] > 0) & (df["letter_mass"] <= 1)).all()


def test_batch_size_and_padding_do_not_change_scores(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind

    a = run_blind(cfg(tiny, tmp_path / "a", batch_size=1)).table.set_index("question_id")
    b = run_blind(cfg(tiny, tmp_path / "b", batch_size=7)).table.set_index("question_id")
    assert list(a["answer"]) == list(b.loc[a.index, "answer"])
    for qid in a.index:
        np.testing.assert_allclose(a.loc[qid, "option_logprobs"], b.loc[qid, "option_logprobs"], atol=1e-5)


def test_output_is_a_blind_run_for_the_audit_frame(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind
    from audit_hub.frame.core import AuditFrame

    out = tmp_path / "out"
    res = run_blind(cfg(tiny, out))
    merged = pd.read_parquet(out / "data" / "blind-00000-of-00001.parquet")
    assert not (out / "shards").exists()
    q = make_questions()
    frame = AuditFrame.from_tables(q, merged)
    assert frame.models_in("blind") == ["tiny"] and frame.models_in("full") == []
    c = frame.correctness("blind", "hit_exact")[:, 0]
    expect = merged.set_index("question_id").loc[q["question_id"], "hit_exact"].astype(int).to_numpy()
    np.testing.assert_array_equal(c, expect)
    assert res.summary["accuracy_exact"] == pytest.approx(expect.mean())
    rc = json.loads((out / "run_config.json").read_text())
    assert rc["fingerprint"]["mode"] == "logprob" and rc["seed"] == 0
    assert "data/blind-*.parquet" in (out / "README.md").read_text()
    # `benchaudit audit --blind OUT` reads the folder as it is
    from audit_hub.readers.ingest import build_frame

    via_ingest = build_frame(tiny["questions"], [], [str(out)])
    assert via_ingest.models_in("blind") == ["tiny"]
    np.testing.assert_array_equal(via_ingest.correctness("blind", "hit_exact")[:, 0], expect)


# ------------------------------------------------------------------------------------------- resume
def test_resume_skips_done_and_refuses_mismatch(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind

    out = tmp_path / "out"
    first = run_blind(cfg(tiny, out, limit=5))
    assert first.summary["n_new"] == 5 and len(first.table) == 5
    second = run_blind(cfg(tiny, out))
    assert second.summary["n_new"] == 10 and second.summary["n_resumed"] == 5
    t = second.table
    assert len(t) == 15 and t["question_id"].is_unique
    assert list(t["question_id"]) == list(make_questions()["question_id"])  # questions-table order
    with pytest.raises(InputError, match="prompt_sha256"):
        run_blind(cfg(tiny, out, prompt_template="{question} {options}"))
    with pytest.raises(InputError, match="mode"):
        run_blind(cfg(tiny, out, mode="generate"))
    with pytest.raises(InputError, match="has no chat template.*--prompt-style plain"):
        run_blind(cfg(tiny, out, model=tiny["plain"]))
    with pytest.raises(InputError, match="model"):
        run_blind(cfg(tiny, out, model=tiny["plain"], prompt_style="plain"))
    third = run_blind(cfg(tiny, out, model=tiny["plain"], prompt_style="plain", overwrite=True))
    assert third.summary["n_new"] == 15 and third.summary["n_resumed"] == 0


def test_foreign_shards_without_config_are_refused(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind

    out = tmp_path / "out"
    run_blind(cfg(tiny, out, limit=2))
    (out / "run_config.json").unlink()
    with pytest.raises(InputError, match="no run_config.json"):
        run_blind(cfg(tiny, out))


# ------------------------------------------------------------------------------------------- context
def test_context_overflow_is_an_error_or_a_marked_truncation(tmp_path):
    from audit_hub.blind.runner import run_blind

    model = build_tiny_llama(tmp_path / "short", seed=2, max_position=128)
    q = make_questions(n_mc=6, n_yn=0, long_every=4)  # q000 and q004 are > 128 tokens, the others < 110
    qp = tmp_path / "q.parquet"
    q.to_parquet(qp)
    tiny = {"model": model, "questions": str(qp)}
    with pytest.raises(InputError, match=r"2 prompt\(s\) do not fit the model's context of 128 tokens.*q000 \(\d+ prompt tokens\), q004"):
        run_blind(cfg(tiny, tmp_path / "err", chat_template=False))
    assert not (tmp_path / "err").exists()  # nothing written
    res = run_blind(cfg(tiny, tmp_path / "trunc", truncate="left", chat_template=False))
    df = res.table.set_index("question_id")
    assert set(df.index[df["truncated"]]) == {"q000", "q004"}
    assert (df.loc[["q000", "q004"], "n_prompt_tokens"] == 128).all()
    assert res.summary["n_truncated"] == 2
    n_q = res.summary["n_questions"]
    card = (tmp_path / "trunc" / "README.md").read_text()  # the console said so; the card says it too
    assert (f"2 of {n_q} prompts were longer than the model's context and lost their first tokens (`--truncate "
            "left`; rows marked `truncated`)") in card
    # --max-length lowers the limit below the model's: every prompt now overflows
    with pytest.raises(InputError, match="context of 8 tokens"):
        run_blind(cfg(tiny, tmp_path / "err2", max_length=8, chat_template=False))


# ------------------------------------------------------------------------------------------- misc
def test_generate_mode_uses_exact_match_parser(tiny, tmp_path):
    from audit_hub.answers import extract_answer
    from audit_hub.blind.runner import run_blind

    res = run_blind(cfg(tiny, tmp_path / "gen", mode="generate", max_new_tokens=4, limit=6))
    df = res.table
    q = make_questions().set_index("question_id")
    assert len(df) == 6 and set(df["scoring"]) == {"generate"}
    assert df["option_logprobs"].isna().all() and df["gold_prob"].isna().all()
    for _, r in df.iterrows():
        ex = extract_answer(r["prediction"], list(q.loc[r["question_id"], "options"]), "mc")
        got = None if pd.isna(r["answer"]) else r["answer"]
        assert got == ex
        assert bool(r["hit_exact"]) == (ex == q.loc[r["question_id"], "answer"])  # unparseable counts as wrong


def test_push_to_hub_is_the_push_of_every_output(tmp_path, monkeypatch):
    """--push-to-hub pushes the blind folder through hub.publish.push_report (the checks of every push)."""
    import huggingface_hub.constants as hc
    from hub_server import TOKEN, HubServer

    from audit_hub.blind import shards as sh
    from audit_hub.blind.hub import push_blind_to_hub

    out = tmp_path / "b"
    sh.open_output(out, [])
    sh.write_run_config(out, {"fingerprint": {"model": "m"}})
    w = sh.ShardWriter(out, 0)
    w.add([{"question_id": "q0", "model": "m", "arm": "blind", "prediction": "A", "answer": "A", "hit_exact": True}])
    w.flush()
    sh.merge(out, ["q0"])
    sh.finish_output(out, {"model": "m", "n_questions": 1}, "q.parquet", inputs=[], command_line=["benchaudit", "blind"])
    with HubServer(tmp_path / "hub") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(hc, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        url = push_blind_to_hub(out, "org/name")
        assert url == f"{server.url}/datasets/org/name"
        got = server.state.folder("dataset", "org/name")
        assert sorted(p.name for p in got.rglob("*") if p.is_file() and p.name != ".gitattributes") == [
            "README.md", "blind-00000-of-00001.parquet", "manifest.json", "run_config.json"]
        (out / "notes.txt").write_text("x")
        with pytest.raises(InputError, match="not listed in manifest.json"):
            push_blind_to_hub(out, "org/name")
    with pytest.raises(InputError, match="ORG/NAME"):
        push_blind_to_hub(out, "no-slash")


def test_bad_options_are_input_errors(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind

    with pytest.raises(InputError, match="--mode"):
        run_blind(cfg(tiny, tmp_path / "o", mode="beam"))
    with pytest.raises(InputError, match="--truncate"):
        run_blind(cfg(tiny, tmp_path / "o", truncate="right"))


def test_numeric_items_are_generated_in_logprob_mode(tiny, tmp_path):
    from audit_hub.blind.runner import run_blind

    q = make_questions(n_mc=2, n_yn=1)
    q = pd.concat([q, pd.DataFrame([{"question_id": "n0", "question": "What is the area?", "options": [],
                                     "answer": "12", "answer_type": "numeric", "category": "n", "hint": None}])])
    qp = tmp_path / "q.parquet"
    q.to_parquet(qp)
    df = run_blind(cfg({**tiny, "questions": str(qp)}, tmp_path / "o", max_new_tokens=3)).table.set_index("question_id")
    assert df.loc["n0", "scoring"] == "generate" and df.loc["n0", "option_logprobs"] is None
    assert df.loc["n0", "hit_exact"] in (False, True)  # unparseable generation is wrong, not unknown
    assert set(df.drop(index="n0")["scoring"]) == {"logprob"}
