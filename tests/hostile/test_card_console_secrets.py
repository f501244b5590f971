"""Input-derived strings in the card and on the console, and credentials anywhere in the output.

One audit runs on a benchmark whose model, judge-free runs and benchmark name carry HTML, Markdown
links and images, table breaks, rich markup, terminal escapes and a URL with a password; every case
below checks one promise on that output. The environment holds canary credentials throughout."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from .conftest import CANARY_ENV, SECRETS, all_bytes, assert_no_secret, write_benchmark

HOSTILE_MODELS = (
    "<img src=x onerror=alert(1)>",
    "![pixel](https://evil.example/p.png)",
    "[click me](javascript:alert(1))",
    "pipe|model\nnewline",
    "[/x] [bold red]rich",
    "esc\x1b[31mred",
    "https://user:CanaryPassw0rd!x@evil.example/m",
)
BENCH = "<script>alert(1)</script> | ![b](https://evil.example/b.png)\nbench"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    import subprocess
    import sys

    from .conftest import REPO

    root = tmp_path_factory.mktemp("hostile_names")
    q, r = write_benchmark(root / "inputs", models=HOSTILE_MODELS, qname="<img src=y onerror=z>.csv")
    env = dict(os.environ, **CANARY_ENV, PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "audit_hub.cli", "audit", "--questions", str(q), "--runs", str(r),
                        "--out", "report", "--calibration-sims", "0", "--n-permutations", "19", "--no-figures",
                        "--dataset", BENCH], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    return root, p


def _card(hostile_run) -> str:
    root, p = hostile_run
    assert p.returncode == 0, p.stderr
    return (root / "report" / "README.md").read_text(encoding="utf-8")


def _body(card: str) -> str:
    return card.split("\n---\n", 1)[1]


def test_run_succeeds_without_traceback(hostile_run):
    _, p = hostile_run
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("raw", ["<img", "<script", r"onerror=alert\(1\)>", r"(?<!\\)\]\(https://evil",
                                 r"(?<!\\)\]\(javascript:", r"!(?<!\\)\[pixel", "\x1b\\["])
def test_card_body_has_no_raw_markup_from_input(hostile_run, raw):
    """No HTML tag and no unescaped link/image bracket from input (an escaped '\\]' renders as text)."""
    assert not re.search(raw, _body(_card(hostile_run)))


def test_card_tables_keep_their_shape(hostile_run):
    body = _body(_card(hostile_run))
    for table in re.findall(r"(?:^\|.*\|\n)+", body, flags=re.M):
        rows = table.strip("\n").split("\n")
        widths = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
        assert len(widths) == 1, table


def test_card_yaml_is_safe_and_plain(hostile_run):
    import yaml

    card = _card(hostile_run)
    header = card.split("---\n")[1]
    data = yaml.safe_load(header)
    assert isinstance(data, dict)
    name = data["pretty_name"]
    assert "\n" not in name and "<script>" in name  # plain text in YAML (rendered as text by the Hub)
    assert "!!python" not in header


def test_manifest_and_summary_are_valid_json_with_names_as_data(hostile_run):
    root, _ = hostile_run
    m = json.loads((root / "report" / "manifest.json").read_text())
    assert m["output_of"] == "audit"
    assert "<img src=x onerror=alert(1)>" in m["models"]["full"]


@pytest.mark.parametrize("secret", SECRETS)
def test_no_canary_secret_in_any_output_byte_or_stream(hostile_run, secret):
    root, p = hostile_run
    blob = all_bytes(root / "report") + p.stdout.encode() + p.stderr.encode()
    assert secret.encode() not in blob


def test_endpoint_password_not_in_manifest(hostile_run):
    root, _ = hostile_run
    m = (root / "report" / "manifest.json").read_text()
    assert "CanaryPassw0rd" not in m and "https://***@127.0.0.1:9" in m


def test_console_markup_in_a_model_name_does_not_crash_or_style(ws):
    q, r = write_benchmark(ws.root / "inputs2", models=("[/x]", "[bold]b", "plain"))
    res = ws.cli("audit", "--questions", str(q), "--runs", str(r), "--out", "report", "--calibration-sims", "0",
                 "--n-permutations", "19", "--no-figures")
    assert res.rc == 0 and "Traceback" not in res.err, res


def test_error_message_scrubs_credentials_from_the_input_path(ws):
    before = ws.snap()
    res = ws.cli("audit", "--questions", "https://u:CanaryPassw0rd!x@host/q.csv", "--runs", str(ws.runs),
                 "--out", "report")
    ws.check_refused(res, before)


def test_error_message_scrubs_hub_token_and_auth_header_in_data(ws):
    bad = ws.root.parent / "bad.csv"
    bad.write_text("question_id,answer\n" f"{SECRETS[0]},A\n", encoding="utf-8")
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(bad), "--runs", str(ws.runs), "--out", "report")
    assert res.rc == 2 and "Traceback" not in res.err, res
    assert_no_secret(res.out, res.err)
    assert ws.snap() == before


def test_output_carrying_an_environment_secret_is_refused(ws):
    # the inputs live outside the workspace: only what benchaudit writes is checked for the secret
    q, r = write_benchmark(ws.root.parent / "inputs3", models=("ok-model", os.environ["MY_SERVICE_TOKEN"]))
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(q), "--runs", str(r), "--out", "report", "--calibration-sims", "0",
                 "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    assert "MY_SERVICE_TOKEN" in res.error_lines[0]


def test_scrub_unit_cases():
    from audit_hub.scrub import scrub

    cases = {
        "see https://bob:pw123@host.example/x": "https://***@host.example/x",
        "s3://AKIAEXAMPLEKEY:secret@bucket/x": "s3://***@bucket/x",
        "Authorization: Bearer abcdef123456": "Authorization: ***",
        "token hf_abcdefghijklmnop used": "hf_***",
        "x-api-key=sk-abcdefghijklmnopqrstuv": "x-api-key=***",
    }
    for raw, want in cases.items():
        assert want in scrub(raw), (raw, scrub(raw))


def test_push_error_does_not_print_the_endpoint_password(ws, previous_report):
    shutil.copytree(previous_report, ws.root / "report")
    res = ws.cli("push", "report", "--repo-id", "org/name")
    assert res.rc == 2 and "Traceback" not in res.err and len(res.error_lines) == 1, res
    assert_no_secret(res.out, res.err, all_bytes(ws.root))
