"""Every card the tool writes (audit, blind, tst, prune, curate, work_dir index) escapes input strings for
where they land, through the one owner (audit_hub/escape.py): ``md_inline`` for text and table cells,
``md_code`` for code spans, ``plain_text`` for YAML values. Each card is rendered with markdown-it (CommonMark
+ tables, raw HTML allowed, as the Hub renders it) and the HTML must hold no tag, attribute or link from input,
and every table keeps its shape. Backticks in ``--model-name`` or the questions file name no longer break out
of the blind card's code span (issue 29)."""

from __future__ import annotations

import os
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPO, all_bytes, assert_no_secret

EVIL = "m`<img src=x onerror=alert(1)>`|[c](javascript:alert(1))**b**"
EVIL_FILE = "q`<img src=x onerror=alert(2)>`|x"  # a file name (no '/')
ALLOWED_TAGS = {"p", "h1", "h2", "h3", "h4", "ul", "ol", "li", "code", "pre", "strong", "em", "table", "thead", "tbody",
                "tr", "th", "td", "a", "img", "br", "hr", "blockquote", "details", "summary", "sub", "sup"}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[int] = []
        self.cells = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.cells = 0
        if tag in ("td", "th"):
            self.cells += 1

    def handle_endtag(self, tag):
        if tag == "tr":
            self.rows.append(self.cells)


def _body(card: str) -> str:
    assert card.startswith("---\n")
    return card.split("\n---\n", 1)[1]


def assert_safe_card(card: str, figures: tuple[str, ...] = ()) -> None:
    """No tag or attribute from input: only Markdown's own tags, images only of the card's figures, links
    only to https addresses, no event handler; every table row as wide as its header."""
    import yaml
    from markdown_it import MarkdownIt

    header = yaml.safe_load(card.split("---\n")[1])
    assert isinstance(header, dict) and "configs" in header
    # linkify: GitHub-flavoured Markdown (and the Hub) link bare addresses, so the card is checked as they read it
    html = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "linkify"]).render(_body(card))
    p = _Tags()
    p.feed(html)
    for tag, attrs in p.tags:
        assert tag in ALLOWED_TAGS, (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        if tag == "img":
            assert attrs.get("src") in figures, attrs
        if tag == "a":
            assert str(attrs.get("href", "")).startswith("https://"), attrs
    for table in html.split("<table>")[1:]:
        q = _Tags()
        q.feed("<table>" + table.split("</table>")[0] + "</table>")
        assert len(set(q.rows)) <= 1, q.rows


def _ok(res) -> None:
    assert res.rc == 0, res
    assert "Traceback" not in res.err + res.out and not res.error_lines, res
    assert_no_secret(res.out, res.err)


def _hostile_benchmark(root: Path, qname: str = "questions.csv") -> tuple[Path, Path]:
    root.mkdir(parents=True, exist_ok=True)
    n = 12
    q = pd.DataFrame({"question_id": [f"q{i}`|*" if i == 0 else f"q{i}" for i in range(n)],
                      "question": [f"What is <b>{i}</b> `x`?" for i in range(n)],
                      "options": [["red", "green", "blue", "black"]] * n, "answer": [["A", "B", "C", "D"][i % 4] for i in range(n)],
                      "category": [EVIL if i % 2 else "plain" for i in range(n)]})
    rows = []
    for m in (EVIL, "beta", "gamma"):
        for arm in ("full", "blind"):
            for i in range(n):
                hit = (i * 7 + len(m) + (arm == "full") * 3) % 3 != 0
                gold = "ABCD"[i % 4]
                rows.append({"question_id": q["question_id"][i], "model": m, "arm": arm,
                             "prediction": gold if hit else "ABCD"[(i + 1) % 4], "hit": int(hit)})
    qp, rp = root / qname, root / "runs.csv"
    q.assign(options=q["options"].map(lambda o: str(list(o)).replace("'", '"'))).to_csv(qp, index=False)
    pd.DataFrame(rows).to_csv(rp, index=False)
    return qp, rp


def _snap_outside(ws, out: str):
    return ws.snap(out)


def test_audit_card_escapes_model_category_id_and_benchmark_names(ws):
    q, r = _hostile_benchmark(ws.root / "inputs_h")
    before = ws.snap("report")
    res = ws.cli("audit", "--questions", str(q), "--runs", str(r), "--out", "report", "--dataset", EVIL,
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    _ok(res)
    assert_safe_card((ws.root / "report" / "README.md").read_text())
    assert ws.snap("report") == before


def test_audit_card_with_figures_shows_only_its_own_images(ws):
    q, r = _hostile_benchmark(ws.root / "inputs_h")
    res = ws.cli("audit", "--questions", str(q), "--runs", str(r), "--out", "report", "--calibration-sims", "0",
                 "--n-permutations", "19")
    _ok(res)
    figs = tuple(f"figures/{p.name}" for p in (ws.root / "report" / "figures").iterdir())
    assert figs
    assert_safe_card((ws.root / "report" / "README.md").read_text(), figs)


def test_tst_card_escapes_categories(ws):
    q, _ = _hostile_benchmark(ws.root / "inputs_h")
    before = ws.snap("t")
    res = ws.cli("tst", "--questions", str(q), "--out", "t", "--k", "2", "--repeats", "1", "--n-estimators", "5")
    _ok(res)
    card = (ws.root / "t" / "README.md").read_text()
    assert_safe_card(card, ("figures/tst_reliability.png",))
    assert ws.snap("t") == before


def test_prune_cards_escape_categories_and_the_questions_file_name(ws):
    q, _ = _hostile_benchmark(ws.root / "inputs_h", qname=EVIL_FILE + ".csv")
    before = ws.snap("p")
    res = ws.cli("prune", "--questions", str(q), "--out", "p", "--budget", "2", "--k", "2", "--repeats", "1",
                 "--n-estimators", "5", "--random-seeds", "2")
    _ok(res)
    assert_safe_card((ws.root / "p" / "README.md").read_text())
    assert_safe_card((ws.root / "p" / "pruned_benchmark" / "README.md").read_text())
    assert ws.snap("p") == before


def test_curate_card_escapes_model_and_benchmark_names(ws):
    from audit_hub.curate.simulate import simulate_pool

    d = ws.root / "pool"
    d.mkdir()
    q, r, _ = simulate_pool(200, 6, seed=2, as_tables=True)
    first = sorted(r["model"].unique())[0]
    r["model"] = r["model"].replace({first: EVIL})
    q.to_parquet(d / "questions.parquet", index=False)
    r.to_parquet(d / "runs.parquet", index=False)
    before = ws.snap("c")
    res = ws.cli("curate", "-q", str(d / "questions.parquet"), "-r", str(d / "runs.parquet"), "--target-size", "60",
                 "--n-boot", "50", "--score-budget", "0", "--junk", "0", "--out", "c")
    _ok(res)
    card = (ws.root / "c" / "README.md").read_text()
    assert "alert(1)" in card  # the name is shown, as text
    assert_safe_card(card, ("figures/ranking_preservation.png", "figures/discrimination.png"))
    assert ws.snap("c") == before


@pytest.mark.parametrize("where", ["model_name", "questions_file"])
def test_blind_card_backticks_do_not_break_out_of_the_code_span(ws, where):
    sys.path.insert(0, str(REPO / "tests"))
    from openai_stub import StubServer

    qpath = ws.root / "inputs" / ((EVIL_FILE if where == "questions_file" else "bq") + ".parquet")
    pd.DataFrame({"question_id": [f"q{i}" for i in range(4)], "question": [f"Q{i}?" for i in range(4)],
                  "options": [["a", "b", "c"]] * 4, "answer": ["A"] * 4}).to_parquet(qpath)
    key = os.environ["OPENAI_API_KEY"]
    before = ws.snap("b")
    with StubServer(key) as stub:
        res = ws.cli("blind", "--backend", "openai", "--base-url", stub.base_url, "--model", "stub-model",
                     "--questions", str(qpath), "--out", "b", "--no-progress",
                     *(["--model-name", EVIL] if where == "model_name" else []))
    _ok(res)
    card = (ws.root / "b" / "README.md").read_text()
    assert_safe_card(card)
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).render(_body(card))
    heading = html.split("</h1>")[0]
    if where == "model_name":  # the whole name is one code span, shown literally
        assert "<code>m`&lt;img src=x onerror=alert(1)&gt;`|[c](javascript:alert(1))**b**</code>" in heading
    assert ws.snap("b") == before
    assert_no_secret(all_bytes(ws.root / "b"))


def test_work_dir_index_card_escapes_its_title_and_rows(tmp_path):
    sys.path.insert(0, str(REPO / "tests"))
    from test_report import make_fake_result

    from audit_hub.escape import md_inline
    from audit_hub.fmt import md_table
    from audit_hub.hub.output import write_report_set
    from audit_hub.report.writer import fill_report

    res = make_fake_result()
    fill = lambda f: fill_report(res, f, command_line=["x"], inputs=[], figures=False)  # noqa: E731
    rows = [{"name": "A", "benchmark": EVIL}, {"name": "B", "benchmark": "plain"}]
    body = md_table(["Benchmark", "Folder"], [[md_inline(r["benchmark"]), r["name"]] for r in rows])
    out = write_report_set(tmp_path / "idx", {"A": fill, "B": fill}, title=EVIL + "\n---\nx: 1", index_rows=rows,
                           body="# Index\n\n" + body + "\n")
    card = (out / "README.md").read_text()
    assert_safe_card(card)
    import yaml

    assert "\n" not in yaml.safe_load(card.split("---\n")[1])["pretty_name"]
    for sub in ("A", "B"):
        assert_safe_card((out / sub / "README.md").read_text())


@pytest.mark.parametrize("s", [EVIL, "```", "`a``b`", " ` ", "", "a|b", "<script>x</script>", "x\n# h\n- y"])
def test_md_code_and_md_inline_render_as_the_literal_text(s):
    from markdown_it import MarkdownIt

    from audit_hub.escape import md_code, md_inline, plain_text

    md = MarkdownIt("commonmark", {"html": True})
    tokens = md.parseInline(md_code(s))[0].children
    want = plain_text(s)
    if want.strip():
        assert [t.type for t in tokens] == ["code_inline"] and tokens[0].content.strip() == want.strip(), tokens
    text_tokens = md.parseInline(md_inline(s))[0].children
    assert all(t.type in ("text", "softbreak") for t in text_tokens), text_tokens
    import html

    assert html.unescape("".join(t.content for t in text_tokens)) == want
