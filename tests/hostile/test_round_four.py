"""Hostile inputs found in the stop-61 red team: each case is the red team's reproduction, with the promise of
docs/safety.md it broke."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from .conftest import REPO, write_benchmark


def _peak_child(args: list[str], cwd: Path) -> tuple[int, int, str]:
    """(exit code, the child's peak RSS in kB, stderr) of ``python -m audit_hub.cli ARGS`` run from a fresh
    wrapper process (RUSAGE_CHILDREN counts the audit and its worker, nothing of this test process)."""
    code = ("import resource, subprocess, sys; r = subprocess.run([sys.executable, '-m', 'audit_hub.cli', "
            "*sys.argv[1:]], capture_output=True, text=True); sys.stderr.write(r.stderr); "
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(cwd)})
    rc, kb = res.stdout.split()[-2:]
    return int(rc), int(kb), res.stderr


def test_one_long_answer_costs_its_length_once_not_rows_times(tmp_path):
    """A 0.7 MB JSON runs file (4,000 rows, one 400 KB answer) peaked at 6.4 GB: pandas built a fixed-width
    NumPy unicode array (rows x the longest text x 4 bytes) before the Arrow column. Now columns.arrow_strings
    builds it in pyarrow (234 MB peak measured)."""
    q, r = write_benchmark(tmp_path / "in", n=1000, models=("alpha", "beta"))
    df = pd.read_csv(r, dtype=str)
    df["hit"] = df["hit"].astype(int)
    df.loc[5, "prediction"] = "The answer is A. " + "blah " * 80_000
    (tmp_path / "in" / "r.json").write_text(df.to_json(orient="records"))
    rc, kb, err = _peak_child(["audit", "-q", str(q), "-r", str(tmp_path / "in" / "r.json"), "-o",
                               str(tmp_path / "out"), "--no-figures", "--calibration-sims", "0"], tmp_path)
    assert rc == 0, err
    assert kb < 1_500_000, f"peak {kb / 1e6:.2f} GB"


def test_an_earlier_audit_inside_the_runs_folder_is_not_read_back(tmp_path):
    """`--runs runs/` with the previous report written to `runs/audit1`: its data/runs was read as runs, so a
    model the user had since dropped from runs.csv was still audited (exit 0, wrong models). The earlier output
    is skipped and named in manifest.json `files_not_read`; given itself as --runs it is still read."""
    from audit_hub.cli import main

    q, r = write_benchmark(tmp_path / "in")
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.move(r, runs / "runs.csv")
    common = ["--no-figures", "--calibration-sims", "0", "--n-permutations", "19"]
    assert main(["audit", "-q", str(q), "-r", str(runs), "-o", str(runs / "audit1"), *common]) == 0
    d = pd.read_csv(runs / "runs.csv", dtype=str)
    d[d["model"] != "gamma"].to_csv(runs / "runs.csv", index=False)
    assert main(["audit", "-q", str(q), "-r", str(runs), "-o", str(tmp_path / "audit2"), *common]) == 0
    s = json.loads((tmp_path / "audit2" / "summary.json").read_text())
    assert s["models"]["full"] == ["alpha", "beta"]
    man = json.loads((tmp_path / "audit2" / "manifest.json").read_text())
    assert {"path": str((runs / "audit1").resolve()),
            "reason": "an earlier `benchaudit audit` output (not read as runs)"} in man["files_not_read"]
    assert not any("audit1" in i["path"] for i in man["inputs"])
    # the report folder given itself is read (its runs config), as before
    assert main(["audit", "-q", str(q), "-r", str(runs / "audit1"), "-o", str(tmp_path / "audit3"), *common]) == 0
    assert "gamma" in json.loads((tmp_path / "audit3" / "summary.json").read_text())["models"]["full"]


def test_addresses_in_model_and_category_names_do_not_become_links(ws):
    """Model and category names that are bare addresses became links under GitHub-flavoured Markdown (its
    autolink extension: http://, www., name@host). The card shows them as text; rendered with linkify, no link
    points at them."""
    from markdown_it import MarkdownIt

    from .test_card_escaping import _body, assert_safe_card

    q, r = write_benchmark(ws.root / "in", models=("http://evil.example/login", "www.phish.com", "ops@evil.com"))
    d = pd.read_csv(q, dtype=str)
    d["category"] = ["ftp://files.evil.com", "mailto:x@evil.com"] * (len(d) // 2)
    d.to_csv(q, index=False)
    res = ws.cli("audit", "--questions", str(q), "--runs", str(r), "--out", "report", "--calibration-sims", "0",
                 "--n-permutations", "19", "--no-figures")
    assert res.rc == 0, res
    card = (ws.root / "report" / "README.md").read_text()
    assert_safe_card(card)
    html = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "linkify"]).render(_body(card))
    hrefs = [h.split('"')[0] for h in html.split('href="')[1:]]
    assert not any("evil" in h or "phish" in h for h in hrefs), hrefs
    assert "http\\://evil.example/login" in card and "www\\.phish.com" in card  # shown, as text


def test_names_reach_figures_as_plain_labels_and_the_console_stays_clean(tmp_path):
    """Model and category names with ESC/CR/BEL, '$' (matplotlib's formula mark) and CJK: matplotlib's missing-glyph
    warnings carried the raw control characters to the console (one warning per glyph), and '$5 and $6' would
    be read as a formula. Labels go through hub.figures.fig_label; no warning reaches stderr."""
    from audit_hub.hub.figures import fig_label

    assert fig_label("\x1b[31mRED\x1b[0m\x07") == "[31mRED [0m" and fig_label("cost $5 and $6") == r"cost \$5 and \$6"
    assert fig_label("x" * 50, 10) == "x" * 9 + "…"
    q, r = write_benchmark(tmp_path / "in", models=("\x1b[31mRED\x1b[0m\x07", "gam\rma", "书生浦语", "cost $5 and $6"))
    d = pd.read_csv(q, dtype=str)
    d["category"] = ["c$1$ \x1b[2J", "类别"] * (len(d) // 2)
    d.to_csv(q, index=False)
    res = subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", "-q", str(q), "-r", str(r), "-o",
                          str(tmp_path / "out"), "--calibration-sims", "0", "--n-permutations", "19"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "Glyph" not in res.stderr and "\x1b" not in res.stderr + res.stdout and "\x07" not in res.stderr
    assert (tmp_path / "out" / "figures" / "categories.png").stat().st_size > 1000


def test_thousands_of_categories_draw_a_bounded_figure(tmp_path):
    """10,000 categories drew a 1,888 x 480,194 pixel categories.png (4 minutes, 8 GB). The figure shows the
    CATEGORY_MAX_BARS categories with the largest excess or count and says so in its titles."""
    from PIL import Image

    from audit_hub.cli import main
    from audit_hub.report.figures import CATEGORY_MAX_BARS

    q, r = write_benchmark(tmp_path / "in", n=600)
    d = pd.read_csv(q, dtype=str)
    d["category"] = [f"c{i}" for i in range(600)]
    d.to_csv(q, index=False)
    assert main(["audit", "-q", str(q), "-r", str(r), "-o", str(tmp_path / "out"), "--calibration-sims", "0",
                 "--n-permutations", "19"]) == 0
    w, h = Image.open(tmp_path / "out" / "figures" / "categories.png").size
    assert h < 150 * (0.32 * CATEGORY_MAX_BARS + 3), (w, h)


def test_a_prune_budget_that_would_remove_everything_is_refused(ws):
    """`prune --frac 1.0` (or a budget >= the question count) wrote an empty pruned benchmark with exit 0."""
    q, _ = write_benchmark(ws.root / "in20", n=20)
    fast = ["--k", "2", "--repeats", "1", "--n-estimators", "5", "--random-seeds", "2"]
    for opt, val, src in (("--frac", "1.0", "frac=1.0"), ("--budget", "50", "budget=50")):
        res = ws.cli("prune", "-q", str(q), "-o", "pr", opt, val, *fast)
        assert res.rc == 2 and res.error_lines == [
            f"error: {opt} would remove all 20 scored questions ({src}); an audit selection keeps at least one"], res
        assert not (ws.root / "pr").exists()
    assert ws.cli("prune", "-q", str(q), "-o", "pr", "--budget", "19", *fast).rc == 0


def test_tst_on_too_few_questions_per_category_is_one_clear_line(ws):
    """Two questions in two categories: scikit-learn's "n_splits=2 cannot be greater than the number of members in
    each class" reached the user through the catch-all ("cannot process the input (ValueError: ...)")."""
    q, _ = write_benchmark(ws.root / "in2", n=2)
    res = ws.cli("tst", "-q", str(q), "-o", "out", "--k", "2", "--repeats", "1", "--n-estimators", "5",
                 "--null-permutations", "5")
    assert res.rc == 2 and res.error_lines == [
        "error: TsT's folds are stratified by category and answer format, and no such stratum has k=2 questions "
        "(the largest has 1); give more questions per category or a smaller --k"], res


def test_tst_llm_without_the_blind_extra_names_the_install_step(ws, monkeypatch):
    """`tst --llm DIR` on a core install was "internal error (ModuleNotFoundError: No module named 'accelerate')"
    after the questions were read."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    q, _ = write_benchmark(ws.root / "in")
    res = ws.cli("tst", "-q", str(q), "-o", "out", "--llm", str(ws.root / "in"))
    assert res.rc == 2 and res.error_lines == [
        'error: TsT-LLM (--llm) needs accelerate, which this install lacks: pip install "benchaudit[blind]" '
        '"torch==2.13.0"'], res


def test_a_harness_results_file_names_the_per_question_files_to_pass(ws):
    """A scores-only results file given as --runs: lighteval's said "use --map OLD=prediction or pass it as the
    questions", lm-eval's and lmms-eval's "JSON file is not a table"; in a folder each was "not a table (e.g. a
    summary)" although lmms-eval's is read for the model name. Each now says what to pass (the real files the
    harnesses wrote, tests/fixtures/*/real)."""
    import glob

    fix = REPO / "tests" / "fixtures"
    cases = [(glob.glob(str(fix / "lighteval/real/v0.13.0/results/StubGood/results_*.json"))[0],
              "a lighteval results file (scores only); pass its details instead"),
             (glob.glob(str(fix / "lm_eval/real/v0.4.13/StubGood/results_*.json"))[0],
              "an lm-evaluation-harness / lmms-eval results file (scores only); pass the samples_*.jsonl files"),
             (glob.glob(str(fix / "lmms_eval/real/v0.7.3/StubGood/*_results.json"))[0],
              "an lm-evaluation-harness / lmms-eval results file (scores only); pass the samples_*.jsonl files")]
    for path, words in cases:
        res = ws.cli("audit", "--runs", path, "--out", "o")
        assert res.rc == 2 and len(res.error_lines) == 1 and words in res.error_lines[0], res
    res = ws.cli("audit", "--runs", str(fix / "lmms_eval/real/v0.7.3"), "--out", "o2", "--calibration-sims", "0",
                 "--no-figures")
    assert res.rc == 0, res
    index = json.loads((ws.root / "o2" / "index.json").read_text())
    why = {Path(s["path"]).name: s["reason"] for s in index["skipped_files"]}
    assert why["20261201_144437_results.json"].startswith("an lm-evaluation-harness / lmms-eval results file")


def test_a_nul_byte_and_a_50_mb_cell_in_a_csv(ws):
    """A NUL byte on line 31 was refused without naming where; a 50 MB cell (as a JSONL file takes it) was
    "malformed CSV (field larger than field limit (131072))" with no row: pyarrow's 16 MB block could not hold
    the row and the csv module's field limit stopped the row search. Now the NUL is located and the long row
    is read."""
    q, r = write_benchmark(ws.root / "in")
    lines = r.read_bytes().split(b"\n")
    lines[30] = lines[30][:5] + b"\x00" + lines[30][5:]
    (ws.root / "nul.csv").write_bytes(b"\n".join(lines))
    res = ws.cli("audit", "-q", str(q), "-r", str(ws.root / "nul.csv"), "-o", "o1")
    assert res.rc == 2 and res.error_lines == [
        f"error: file {ws.root / 'nul.csv'}, row 30: the file holds NUL bytes (the first on line 31): it is binary "
        "data, not UTF-8 text"], res
    d = pd.read_csv(r, dtype=str)
    d.loc[3, "prediction"] = "The answer is A. " + "x" * 20_000_000
    d.to_csv(ws.root / "big.csv", index=False)
    res = ws.cli("audit", "-q", str(q), "-r", str(ws.root / "big.csv"), "-o", "o2", "--no-figures",
                 "--calibration-sims", "0", "--n-permutations", "19")
    assert res.rc == 0, res


def test_parquet_text_columns_of_raw_bytes_are_refused_by_name(ws):
    """Parquet `binary` columns: an all-binary runs file was refused with 'unknown arm "b'full'"' (the bytes'
    repr), and invalid UTF-8 in a binary prediction was replaced silently where a CSV is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    q, r = write_benchmark(ws.root / "in")
    d = pd.read_csv(r, dtype=str)
    pq.write_table(pa.table({c: pa.array([x.encode() for x in d[c]], pa.binary()) for c in d.columns}),
                   ws.root / "bin.parquet")
    res = ws.cli("audit", "-q", str(q), "-r", str(ws.root / "bin.parquet"), "-o", "o")
    assert res.rc == 2 and res.error_lines == [
        f"error: file {ws.root / 'bin.parquet'}, column 'question_id': column 'question_id' holds raw bytes "
        "(binary, no UTF-8 annotation); write it as a string column"], res


def test_a_local_hub_layout_questions_folder_leaves_no_copy_in_the_users_cache(tmp_path):
    """`-q bench/` (data/test-*.parquet + README.md) wrote a full Arrow copy of the data and lock files under
    ~/.cache/huggingface/datasets: outside --out, and gigabytes for an image benchmark. It is now prepared in a
    temporary cache removed after the read."""
    q, r = write_benchmark(tmp_path / "in")
    (tmp_path / "bench" / "data").mkdir(parents=True)
    pd.read_csv(q, dtype=str).to_parquet(tmp_path / "bench" / "data" / "test-00000-of-00001.parquet")
    (tmp_path / "bench" / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n"
                                                  "  - split: test\n    path: data/test-*.parquet\n---\n# b\n")
    home = tmp_path / "home"
    home.mkdir()
    res = subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", "-q", str(tmp_path / "bench"), "-r", str(r),
                          "-o", str(tmp_path / "out"), "--no-figures", "--calibration-sims", "0"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(home),
                              "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["n_questions"] == 12
    assert not [p for p in home.rglob("*") if p.is_file()]
