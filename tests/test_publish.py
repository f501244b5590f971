"""Publishing end to end through the real huggingface_hub client against tests/hub_server.py.

The server runs on 127.0.0.1 (no network); HF_ENDPOINT points at it. We check that the folder the
server receives equals the report folder byte for byte, that a second push is a no-op, that stale
shards go away in the same single commit, that bad input gives one clear message, and that
``evaluate.load("benchaudit/<name>")`` works over HTTP after ``push-metrics``.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import TOKEN, HubServer  # noqa: E402
from test_report import make_fake_result  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _tree(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def assert_same_folder(received: Path, local: Path) -> None:
    got = [p for p in _tree(received) if p != ".gitattributes"]
    assert got == _tree(local)
    _, mismatch, errors = filecmp.cmpfiles(local, received, got, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    import huggingface_hub.constants as hc

    with HubServer(tmp_path / "hub") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.setattr(hc, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        yield server


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from audit_hub.report import write_report

    out = tmp_path_factory.mktemp("pub") / "report"
    write_report(make_fake_result(), out, command_line=["benchaudit", "audit"], inputs=[])
    return out


def test_push_roundtrip_noop_and_stale_shards(hub, report, tmp_path):
    from audit_hub.hub.publish import push_report
    from audit_hub.report import write_report

    res = push_report(report, "benchaudit/tiny-audit")
    assert not res["no_op"] and res["deleted"] == []
    received = hub.state.folder("dataset", "benchaudit/tiny-audit")
    assert_same_folder(received, report)
    repo = hub.state.repo("dataset", "benchaudit/tiny-audit")
    n_commits = len(repo.commits)
    assert n_commits == 2  # initial + the report, in ONE commit

    # the same folder again: no new commit
    res2 = push_report(report, "benchaudit/tiny-audit")
    assert res2["no_op"] and res2["commit"] == res["commit"]
    assert len(repo.commits) == n_commits

    # a re-sharded report: new shards added and the old ones deleted in the same commit
    sharded = tmp_path / "sharded"
    write_report(make_fake_result(), sharded, command_line=["x"], inputs=[], figures=False, shard_bytes=1)
    assert (sharded / "data" / "questions-00005-of-00006.parquet").is_file()
    res3 = push_report(sharded, "benchaudit/tiny-audit")
    assert len(repo.commits) == n_commits + 1
    assert "data/questions-00000-of-00001.parquet" in res3["deleted"]
    assert "figures/judge.png" in res3["deleted"]
    assert_same_folder(received, sharded)
    assert (received / ".gitattributes").is_file()  # never deleted

    # what arrived still loads as a dataset
    import datasets

    q = datasets.load_dataset(str(received), "questions", split="train")
    assert q.num_rows == 6


def test_push_to_branch_and_pr_leave_main_alone(hub, report):
    from audit_hub.hub.publish import push_report

    res = push_report(report, "benchaudit/branchy", revision="audit-v2")
    assert res["revision"] == "audit-v2"
    assert_same_folder(hub.state.folder("dataset", "benchaudit/branchy", "audit-v2"), report)
    assert _tree(hub.state.folder("dataset", "benchaudit/branchy")) == [".gitattributes"]
    pr = push_report(report, "benchaudit/branchy", create_pr=True)
    assert pr["pr_url"] and pr["pr_url"].endswith("discussions/1")
    assert_same_folder(hub.state.folder("dataset", "benchaudit/branchy", "refs/pr/1"), report)
    assert _tree(hub.state.folder("dataset", "benchaudit/branchy")) == [".gitattributes"]


def test_private_flag_reaches_the_hub(hub, report):
    from audit_hub.hub.publish import push_report

    push_report(report, "benchaudit/secret", private=True)
    assert hub.state.repo("dataset", "benchaudit/secret").private


@pytest.mark.parametrize("bad", ["no-namespace", "org/with space", "org/a--b", "a/b/c", "", "org/.hidden"])
def test_bad_repo_id_one_clear_message(hub, report, bad):
    from audit_hub.errors import InputError
    from audit_hub.hub.publish import push_report

    with pytest.raises(InputError, match="ORG/NAME"):
        push_report(report, bad)
    assert not [r for r in hub.state.requests if r[0] == "POST"]


def test_missing_and_rejected_token(hub, report, monkeypatch, capsys):
    from audit_hub.cli import main
    from audit_hub.hub.publish import PublishError, push_report

    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(PublishError, match="no Hugging Face token found: set HF_TOKEN"):
        push_report(report, "benchaudit/x")
    assert main(["push", str(report), "--repo-id", "benchaudit/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no Hugging Face token found")

    wrong = "hf_wrongwrongwrongwrong"
    monkeypatch.setenv("HF_TOKEN", wrong)
    with pytest.raises(PublishError) as ei:
        push_report(report, "benchaudit/x")
    assert "rejected the token" in str(ei.value) and "401" in str(ei.value)
    assert wrong not in str(ei.value)
    assert main(["push", str(report), "--repo-id", "bad id"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ORG/NAME" in err[0]


def test_not_a_report_folder(hub, tmp_path):
    from audit_hub.errors import InputError
    from audit_hub.hub.publish import push_report

    with pytest.raises(InputError, match="does not exist"):
        push_report(tmp_path / "missing", "benchaudit/x")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "README.md").write_text("---\nlicense: mit\n---\n")
    with pytest.raises(InputError, match="missing manifest.json"):
        push_report(tmp_path / "half", "benchaudit/x")


def test_resolve_hub_revision(hub, report):
    from audit_hub.errors import InputError
    from audit_hub.hub.publish import push_report, resolve_hub_revision

    res = push_report(report, "benchaudit/resolvable")
    assert resolve_hub_revision("benchaudit/resolvable") == res["commit"]
    assert resolve_hub_revision("benchaudit/resolvable", "main") == res["commit"]
    with pytest.raises(InputError, match="cannot resolve dataset benchaudit/resolvable@nope"):
        resolve_hub_revision("benchaudit/resolvable", "nope")
    with pytest.raises(InputError, match="cannot resolve dataset benchaudit/absent@main"):
        resolve_hub_revision("benchaudit/absent")


@pytest.mark.slow
def test_push_script_subprocess(tmp_path, report):
    """scripts/push_report.py in a fresh process (HF_ENDPOINT read before huggingface_hub is imported)."""
    with HubServer(tmp_path / "hub") as server:
        env = {**os.environ, "HF_ENDPOINT": server.url, "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hfhome"),
               "HF_HUB_DISABLE_XET": "1"}
        p = subprocess.run([sys.executable, str(REPO / "scripts" / "push_report.py"), str(report), "--repo-id",
                            "benchaudit/scripted"], env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert "pushed" in p.stdout and TOKEN not in p.stdout + p.stderr
        assert_same_folder(server.state.folder("dataset", "benchaudit/scripted"), report)
        p = subprocess.run([sys.executable, str(REPO / "scripts" / "push_report.py"), str(report), "--repo-id", "x"],
                           env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.startswith("error:") and len(p.stderr.strip().splitlines()) == 1


TINY_METRIC = '''\
"""A tiny metric used only to prove the Space round trip."""

import datasets
import evaluate


class TinyCount(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="count", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("int32"),
                                                               "references": datasets.Value("int32")}))

    def _compute(self, predictions, references):
        return {"n_equal": sum(int(p == r) for p, r in zip(predictions, references))}
'''


@pytest.mark.slow
def test_push_metrics_then_evaluate_load_over_http(tmp_path, hub):
    from audit_hub.hub.publish import push_metrics

    mdir = tmp_path / "metrics"
    (mdir / "tiny_count").mkdir(parents=True)
    (mdir / "tiny_count" / "tiny_count.py").write_text(TINY_METRIC)
    (mdir / "tiny_count" / "README.md").write_text("---\ntitle: tiny\nsdk: gradio\napp_file: app.py\n---\n")
    res = push_metrics("benchaudit", metrics_dir=mdir)
    assert [r["repo_id"] for r in res] == ["benchaudit/tiny_count"]
    assert hub.state.repo("space", "benchaudit/tiny_count").sdk == "gradio"
    real = REPO / "metrics"
    have_real = (real / "visual_dependency" / "visual_dependency.py").is_file()
    if have_real:
        res = push_metrics("benchaudit", metrics_dir=real)
        assert {r["repo_id"] for r in res} >= {"benchaudit/visual_dependency"}
        assert_same_folder(hub.state.folder("space", "benchaudit/visual_dependency"), real / "visual_dependency")
        again = push_metrics("benchaudit", metrics_dir=real, names=["visual_dependency"])
        assert again[0]["no_op"]

    # evaluate imports transformers (and torch) only for its Evaluator; loading a metric does not need it, and
    # blocking it saves most of the start-up time on a loaded machine.
    code = textwrap.dedent("""
        import sys
        sys.modules["transformers.pipelines"] = None
        import json, evaluate
        out = {}
        m = evaluate.load("benchaudit/tiny_count")
        out["tiny"] = m.compute(predictions=[1, 2, 3], references=[1, 0, 3])
        if HAVE_REAL:
            vd = evaluate.load("benchaudit/visual_dependency")
            # 2 models x 4 questions; per question (f, b): q1 (2, 2), q2 (2, 0), q3 (0, 0), q4 (1, 0)
            qs = ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"]
            ms = ["m0", "m1"] * 4
            pred = ["A", "A", "B", "B", "C", "D", "C", "A"]
            blind = ["A", "A", "A", "C", "C", "D", "B", "B"]
            ref = ["A", "A", "B", "B", "A", "A", "C", "C"]
            r = vd.compute(question_ids=qs, models=ms, predictions=pred, blind_predictions=blind, references=ref,
                           n_permutations=99, seed=0)
            out["vd"] = {k: r[k] for k in ("zero_gain_share", "null_mean", "excess", "p_value")}
        print("RESULT " + json.dumps(out))
    """).replace("HAVE_REAL", str(have_real))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_EVALUATE_OFFLINE", "HF_HUB_OFFLINE"))}
    env.update({"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hfhome"), "HF_MODULES_CACHE": str(tmp_path / "mods"),
                "HF_DATASETS_OFFLINE": "0", "HF_TOKEN": TOKEN})
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    assert out["tiny"] == {"n_equal": 2}
    got = {path for method, path in hub.state.requests if method == "GET"}
    assert "/spaces/benchaudit/tiny_count/resolve/main/tiny_count.py" in got
    if have_real:
        assert "/spaces/benchaudit/visual_dependency/resolve/main/visual_dependency.py" in got
        assert out["vd"]["zero_gain_share"] == pytest.approx(0.5)


def test_a_pull_request_of_what_the_branch_already_has_says_nothing_was_pushed(hub, report, tmp_path):
    """New-user walkthrough: `push --create-pr` of a report already on main printed huggingface_hub's 'No files
    have been modified ... Skipping' and then 'pushed 10 file(s): <main's commit>', though no PR was opened."""
    from cli_run import run_cli

    from audit_hub.hub.publish import push_report

    push_report(report, "benchaudit/samepr")
    n = len(hub.state.repo("dataset", "benchaudit/samepr").commits)
    res = push_report(report, "benchaudit/samepr", create_pr=True)
    assert res["no_op"] and res["pr_url"] is None
    assert len(hub.state.repo("dataset", "benchaudit/samepr").commits) == n
    out = run_cli("push", report, "--repo-id", "benchaudit/samepr", "--create-pr")  # the hub fixture's env
    assert out.returncode == 0, out.stderr
    said = " ".join((out.stdout + out.stderr).split())
    assert "already has this report" in said and "no pull request opened" in said
    assert "pushed" not in said and "No files have been modified" not in said


def test_a_second_pull_request_of_the_same_outputs_is_not_opened(hub, report, tmp_path):
    """Curate-and-push review: two `push --create-pr` of one unchanged folder opened two pull requests. The PR's
    title carries the outputs' id; the second push finds the open PR and says so. A changed folder opens one."""
    import shutil

    from cli_run import run_cli

    from audit_hub.hub.publish import outputs_id, push_report, report_files

    push_report(report, "benchaudit/twopr")  # main has an earlier state; the PRs propose this folder
    changed = tmp_path / "changed"
    shutil.copytree(report, changed)
    first = push_report(report, "benchaudit/twopr", create_pr=True)
    repo = hub.state.repo("dataset", "benchaudit/twopr")
    assert first["pr_url"] is None and first["no_op"]  # main already has it: no PR (unchanged behaviour)
    # a folder that main lacks: its manifest's times differ, its files the same -> the same id
    m = json.loads((changed / "manifest.json").read_text())
    card = (changed / "README.md").read_text() + "\n<!-- edited -->\n"
    (changed / "README.md").write_text(card)
    from audit_hub.hub.folders import sha256_file

    for o in m["outputs"]:
        if o["path"] == "README.md":
            o["sha256"], o["bytes"] = sha256_file(changed / "README.md"), (changed / "README.md").stat().st_size
    (changed / "manifest.json").write_text(json.dumps(m))
    tag = outputs_id(report_files(changed))
    one = push_report(changed, "benchaudit/twopr", create_pr=True)
    assert one["pr_url"] and not one["no_op"] and len(repo.prs) == 1
    assert repo.pr_titles[0].endswith(f"[outputs {tag}]")
    m["finished_at"] = "2030-01-01T00:00:00+00:00"  # a rerun: same outputs, another manifest
    (changed / "manifest.json").write_text(json.dumps(m))
    assert outputs_id(report_files(changed)) == tag
    two = push_report(changed, "benchaudit/twopr", create_pr=True)
    assert two["no_op"] and two["open_pr"] == 1 and two["pr_url"].endswith("/discussions/1") and len(repo.prs) == 1
    out = run_cli("push", changed, "--repo-id", "benchaudit/twopr", "--create-pr")
    said = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 0 and "open pull request #1 already proposes these outputs" in said, said
    assert len(repo.prs) == 1


def test_a_pushed_report_loads_by_its_repo_id(hub, report, tmp_path):
    """TsT review: `datasets.load_dataset("me/NAME")` failed against the Hub stand-in ("Revision 'None' doesn't
    exist": datasets resolves a branch to its commit, then asks for resolve/<sha>/...), so the tests reloaded the
    mirrored folder instead of the repo. The stand-in now answers by commit too: the report loads by its id."""
    from audit_hub.hub.publish import push_report

    push_report(report, "benchaudit/by-id")
    code = ("import datasets, json; d = datasets.load_dataset('benchaudit/by-id', 'questions', split='train'); "
            "print(json.dumps([d.num_rows, sorted(d.column_names)[:3]]))")
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_XET": "1",
           "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    n, _cols = json.loads(p.stdout.strip().splitlines()[-1])
    local = pd.concat([pd.read_parquet(f) for f in sorted((report / "data").glob("questions-*.parquet"))])
    assert n == len(local)
