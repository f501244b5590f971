"""Blind runner on tiny random-weight models of six VLM families (tests/tiny_vlm.py), CPU, offline.

Per family: logprob and generate modes complete; batch 1 and batch 6 agree within 1e-4 (float32); the
tokenised text-only prompt holds no image token. ``--image-mode blank`` on the families whose processor
builds without torchvision (LLaVA, Idefics3, Gemma 3): the prompt then holds the image tokens and the
scores differ from text-only. Qwen2-VL (M-RoPE) gives the same answers with 1 and 2 processes.
``--device-map auto`` (and a disk-offloaded map) scores like a plain load. Bad inputs: one line, exit 2,
nothing written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_blind import make_questions  # noqa: E402
from tiny_model import build_tiny_llama  # noqa: E402
from tiny_vlm import FAMILIES, build_tiny_vlm  # noqa: E402

from audit_hub.errors import InputError  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[1]
BLANK_FAMILIES = ("llava", "idefics3", "gemma3")  # processors that build without torchvision


@pytest.fixture(scope="module")
def fam(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    qp = root / "q.parquet"
    make_questions(n_mc=4, n_yn=2, seed=7).to_parquet(qp)
    return {"root": root, "questions": str(qp), "models": {}}


def model_path(fam, family: str) -> str:
    if family not in fam["models"]:
        fam["models"][family] = build_tiny_vlm(family, fam["root"] / family, seed=1)
    return fam["models"][family]


def cfg(fam, family, out, **kw):
    from audit_hub.blind.runner import BlindConfig

    base = {"model": model_path(fam, family), "questions": fam["questions"], "out": str(out), "progress": False,
            "model_name": family, "dtype": "float32", "batch_size": 6}
    base.update(kw)
    return BlindConfig(**base)


def encoded(fam, family, image_mode):
    """The token IDs the runner feeds for every question (same functions as run_blind) and the model's
    image token IDs."""
    from transformers import AutoConfig

    from audit_hub.blind.inputs import encode_blank, encode_text, image_token_ids
    from audit_hub.blind.prompt import ChatFormatter, PromptBuilder
    from audit_hub.blind.runner import load_question_table, load_tokenizer

    c = cfg(fam, family, fam["root"] / "unused", image_mode=image_mode)
    mconfig = AutoConfig.from_pretrained(c.model)
    tok, proc = load_tokenizer(c, mconfig)
    chat = ChatFormatter(tok, proc)
    q = load_question_table(c.questions)
    prompts = [PromptBuilder().render(r.question, r.options, r.answer_type, r.hint) for r in q.itertuples()]
    enc = encode_blank(proc, chat, prompts) if image_mode == "blank" else encode_text(tok, chat, [chat(p) for p in prompts])
    return enc, image_token_ids(mconfig, tok, proc)


def _max_diff(a, b) -> float:
    return max(float(np.abs(np.asarray(x, float) - np.asarray(y, float)).max()) for x, y in zip(a, b))


@pytest.mark.parametrize("family", FAMILIES)
def test_family_text_only_batches_agree_and_generate_completes(fam, tmp_path, family):
    from audit_hub.blind.runner import run_blind

    one = run_blind(cfg(fam, family, tmp_path / "b1", batch_size=1)).table.set_index("question_id")
    six = run_blind(cfg(fam, family, tmp_path / "b6", batch_size=6)).table.set_index("question_id")
    assert len(one) == 6 and set(one["scoring"]) == {"logprob"}
    assert list(one["answer"]) == list(six.loc[one.index, "answer"])
    assert _max_diff(one["option_logprobs"], six.loc[one.index, "option_logprobs"]) < 1e-4
    assert all(len(v) == (len(o) if t == "mc" else 2) for v, o, t in
               zip(one["option_logprobs"], make_questions(4, 2, seed=7)["options"], make_questions(4, 2, seed=7)["answer_type"]))
    gen = run_blind(cfg(fam, family, tmp_path / "gen", mode="generate", max_new_tokens=3, limit=3)).table
    assert len(gen) == 3 and set(gen["scoring"]) == {"generate"}
    assert gen["prediction"].map(lambda s: isinstance(s, str)).all()
    enc, img = encoded(fam, family, "none")
    assert img, "the family's image tokens are known"
    assert not any(img.intersection(ids) for ids in enc.ids)  # text-only: no image token in any prompt
    assert list(one["n_prompt_tokens"]) == [len(ids) for ids in enc.ids]


@pytest.mark.parametrize("family", BLANK_FAMILIES)
def test_family_blank_image_mode(fam, tmp_path, family):
    from audit_hub.blind.runner import run_blind

    enc, img = encoded(fam, family, "blank")
    assert all(img.intersection(ids) for ids in enc.ids)  # every prompt carries the blank image's tokens
    assert "pixel_values" in enc.shared
    blank1 = run_blind(cfg(fam, family, tmp_path / "b1", image_mode="blank", batch_size=1)).table.set_index("question_id")
    blank6 = run_blind(cfg(fam, family, tmp_path / "b6", image_mode="blank")).table.set_index("question_id")
    assert _max_diff(blank1["option_logprobs"], blank6.loc[blank1.index, "option_logprobs"]) < 1e-4
    assert list(blank1["n_prompt_tokens"]) == [len(ids) for ids in enc.ids]
    text = run_blind(cfg(fam, family, tmp_path / "t")).table.set_index("question_id")
    assert (blank1["n_prompt_tokens"] > text["n_prompt_tokens"]).all()
    assert _max_diff(blank1["option_logprobs"], text["option_logprobs"]) > 1e-3  # the image reached the model
    import json

    rc = json.loads((tmp_path / "b1" / "run_config.json").read_text())
    assert rc["image_mode"] == "blank" and rc["fingerprint"]["image_mode"] == "blank"
    assert "image mode `blank`" in (tmp_path / "b1" / "README.md").read_text()


def test_blank_needs_the_processor_and_names_what_to_install(fam, tmp_path):
    from audit_hub.blind.runner import run_blind

    try:
        import torchvision  # noqa: F401
        pytest.skip("torchvision is installed: the Qwen2-VL processor builds")
    except ImportError:
        pass
    with pytest.raises(InputError, match=r"needs torchvision: pip install 'benchaudit\[vision\]'"):
        run_blind(cfg(fam, "qwen2_vl", tmp_path / "o", image_mode="blank"))
    assert not (tmp_path / "o").exists()


def test_chat_template_that_inserts_an_image_cannot_run_text_only(fam, tmp_path):
    from audit_hub.blind.__main__ import main

    tpl = "{{ bos_token }}{% for m in messages %}<|user|>\n<image>\n{{ m['content'] }}<|end|>\n{% endfor %}<|assistant|>\n"
    path = build_tiny_vlm("llava", fam["root"] / "llava-imgtpl", seed=2, chat_template=tpl)
    out = tmp_path / "o"
    rc = main(["--model", path, "--questions", fam["questions"], "--out", str(out), "--no-progress"])
    assert rc == 2 and not out.exists()
    with pytest.raises(InputError, match="contains image token.*cannot run text-only; use --image-mode blank"):
        from audit_hub.blind.runner import run_blind

        run_blind(cfg(fam, "llava", out, model=path))


def test_model_without_chat_template_needs_an_explicit_prompt(fam, tmp_path, capsys):
    from audit_hub.blind.__main__ import main

    path = build_tiny_llama(fam["root"] / "base-llama", seed=4, chat_template=False)
    capsys.readouterr()
    out = tmp_path / "o"
    rc = main(["--model", path, "--questions", fam["questions"], "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "has no chat template" in err and "--prompt-style plain" in err
    assert not out.exists()
    assert main(["--model", path, "--questions", fam["questions"], "--out", str(out), "--no-progress",
                 "--prompt-style", "plain"]) == 0


def test_device_map_auto_scores_like_a_plain_load(fam, tmp_path):
    """accelerate big-model loading on CPU: ``auto`` and a map that offloads layers to disk."""
    from audit_hub.blind.runner import BlindConfig, run_blind

    path = build_tiny_llama(fam["root"] / "dm-llama", seed=5, chat_template=True, hidden=64, layers=4)
    base = {"model": path, "questions": fam["questions"], "progress": False, "batch_size": 3}
    plain = run_blind(BlindConfig(out=str(tmp_path / "plain"), **base)).table.set_index("question_id")
    auto = run_blind(BlindConfig(out=str(tmp_path / "auto"), device_map="auto", **base)).table.set_index("question_id")
    disk = run_blind(BlindConfig(out=str(tmp_path / "disk"), device_map="auto", max_memory="cpu=150KB",
                                 **base)).table.set_index("question_id")
    for other in (auto, disk):
        assert list(other["answer"]) == list(plain["answer"])
        assert _max_diff(other["option_logprobs"], plain["option_logprobs"]) < 1e-5
    rc = (tmp_path / "disk" / "run_config.json").read_text()
    assert '"device_map": "auto"' in rc and '"max_memory": "cpu=150KB"' in rc
    with pytest.raises(InputError, match="--max-memory needs --device-map"):
        BlindConfig(out="x", max_memory="0=10GiB", **base).validate()
    with pytest.raises(InputError, match="not a size"):
        BlindConfig(out="x", device_map="auto", max_memory="0=lots", **base).validate()


@pytest.mark.slow
def test_qwen2_vl_two_processes_equal_one(fam, tmp_path):
    """M-RoPE family across processes: torchrun, 2 CPU processes (gloo) vs 1 process."""
    from test_blind_multiproc import _env

    from audit_hub.blind.runner import run_blind

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not available")
    path = model_path(fam, "qwen2_vl")
    two = tmp_path / "two"
    p = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", "-m", "audit_hub.blind", "--model", path,
                        "--questions", fam["questions"], "--out", str(two), "--batch-size", "2", "--dtype", "float32",
                        "--no-progress", "--keep-shards"], capture_output=True, text=True, timeout=300, env=_env(),
                       cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    assert {f.name.split("-")[0] for f in (two / "shards").iterdir()} == {"rank0", "rank1"}
    import pandas as pd

    t2 = pd.read_parquet(two / "data" / "blind-00000-of-00001.parquet").set_index("question_id")
    t1 = run_blind(cfg(fam, "qwen2_vl", tmp_path / "one", batch_size=2)).table.set_index("question_id")
    assert list(t2.index) == list(t1.index) and (t2["answer"] == t1["answer"]).all()
    assert _max_diff(t2["option_logprobs"], t1["option_logprobs"]) < 1e-5
