"""On-disk state of a blind run: fingerprint, per-process Parquet shards, final merge.

Layout of an output folder::

    OUT/run_config.json                     fingerprint + settings (refuses a mismatched rerun)
    OUT/shards/rank{r}-{seq:05d}.parquet    written by process r as it goes (tmp file + rename)
    OUT/data/blind-00000-of-00001.parquet   merged result (Hub dataset layout)
    OUT/README.md                           dataset card for the Hub

A shard appears atomically (``os.replace`` of a finished temporary file), so a killed process loses
at most the batch it was working on. On restart every question ID found in the merged file or in a
shard counts as done. The merge writes the merged file atomically and only then removes the shards
it contains, so a crash during the merge loses nothing either.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InputError

SHARD_RE = re.compile(r"^rank(\d+)-(\d{5,})\.parquet$")
MERGED_REL = "data/blind-00000-of-00001.parquet"
CONFIG_NAME = "run_config.json"

# Output columns (the runs schema of the core plus scoring details).
COLUMNS = ("question_id", "model", "arm", "prediction", "answer", "hit_exact", "option_logprobs",
           "gold_prob", "letter_mass", "scoring", "n_prompt_tokens", "truncated", "options_missing")


TEXT_FIELDS = ("question_id", "model", "prediction", "answer", "scoring")


def arrow_schema():
    import pyarrow as pa

    return pa.schema([
        ("question_id", pa.string()), ("model", pa.string()), ("arm", pa.string()),
        ("prediction", pa.string()), ("answer", pa.string()), ("hit_exact", pa.bool_()),
        ("option_logprobs", pa.list_(pa.float64())), ("gold_prob", pa.float64()),
        ("letter_mass", pa.float64()), ("scoring", pa.string()), ("n_prompt_tokens", pa.int32()),
        ("truncated", pa.bool_()),
        # served runs: option letters absent from the server's top_logprobs (null for local runs)
        ("options_missing", pa.list_(pa.string())),
    ])


def _conform(table):
    """Cast a shard to the current schema (a shard written before a column existed gets nulls)."""
    import pyarrow as pa

    schema = arrow_schema()
    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(len(table), type=f.type))
    return table.select(schema.names).cast(schema)


# ---------------------------------------------------------------------------------------- fingerprint
def model_fingerprint(model: str, config_json: str, commit: str | None, revision: str | None) -> dict:
    """Identity of the weights: Hub commit (or revision) and, for a local folder, the weight files."""
    fp: dict[str, Any] = {"model": model, "revision": revision, "commit": commit,
                          "config_sha256": hashlib.sha256(config_json.encode("utf-8")).hexdigest()}
    p = Path(model)
    if p.is_dir():
        files = sorted(f for f in os.listdir(p) if f.endswith((".safetensors", ".bin", ".pt", ".gguf", ".json"))
                       and not f.startswith("."))
        fp["files"] = [[f, (p / f).stat().st_size] for f in files]
    return fp


ROW_FIELDS = ("question", "hint", "options", "answer", "answer_type", "n_options")


def question_row_hashes(questions) -> dict[str, str]:
    """Per question ID, a hash of what the prompt and the score depend on: text, hint, options, gold and
    answer type. Stored in run_config.json; a resume refuses when any ID already in the output has a
    different hash now (same IDs, other questions), and accepts new IDs (a larger ``--limit``)."""
    cols = [c for c in ROW_FIELDS if c in questions.columns]
    ids = questions["question_id"].astype(str).tolist()
    out: dict[str, str] = {}
    for qid, row in zip(ids, questions[cols].itertuples(index=False, name=None)):
        blob = json.dumps([_plain(v) for v in row], ensure_ascii=True).encode("ascii")
        out[qid] = hashlib.sha256(blob).hexdigest()[:20]
    return out


def check_question_rows(out: Path, rows: dict[str, str], overwrite: bool) -> dict[str, str] | None:
    """Refuse to resume over predictions made for other versions of the same question IDs.

    Returns the merged ID -> hash map to record (None when there is nothing recorded to compare with)."""
    if overwrite:
        return None
    old = read_run_config(out)
    recorded = old.get("question_rows") if isinstance(old, dict) else None
    if not isinstance(recorded, dict):
        return None
    changed = [q for q, h in rows.items() if q in recorded and recorded[q] != h]
    if changed:
        from ..escape import show_id

        raise InputError(f"{out} holds predictions for {len(changed)} question(s) whose text, options or gold "
                         f"changed since (first: {show_id(changed[0])}; question_rows differ); pass --overwrite to "
                         "discard them or choose another --out", file=str(out / CONFIG_NAME))
    if all(q in recorded for q in rows):
        return None
    return {**recorded, **rows}


def _plain(v: Any) -> Any:
    if v is None:
        return None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and v != v:
        return None
    return v if isinstance(v, (str, int, float, bool)) else str(v)


def is_blind_output(folder: Path) -> bool:
    """A folder written by ``benchaudit blind``: our run_config.json, or our shard/merged layout (whose
    missing config :func:`check_fingerprint` then reports)."""
    cfg = folder / CONFIG_NAME
    if cfg.is_symlink() or not cfg.is_file():
        return bool(list_shards(folder)) or (folder / MERGED_REL).is_file()
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "fingerprint" in data


def check_output_folder(out: Path, inputs: list) -> None:
    """The blind output folder obeys the same rules as every output folder (see
    :func:`audit_hub.hub.folders.check_output_target`); a previous blind output is resumed in place."""
    from ..hub.folders import check_output_target

    check_output_target(out, command="blind", inputs=inputs, recognise=is_blind_output)


def fingerprint_digest(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode("utf-8")).hexdigest()


def read_run_config(out: Path) -> dict | None:
    path = out / CONFIG_NAME
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"{CONFIG_NAME} is not valid JSON ({e}); pass --overwrite to start again",
                         file=str(path)) from None


def check_fingerprint(out: Path, fp: dict, overwrite: bool) -> None:
    """Refuse to mix into ``out`` when its recorded fingerprint differs (unless ``overwrite``)."""
    old = read_run_config(out)
    has_data = (out / "shards").is_dir() and any(SHARD_RE.match(f) for f in os.listdir(out / "shards"))
    has_data = has_data or (out / MERGED_REL).exists()
    if overwrite:
        return
    if old is None:
        if has_data:
            raise InputError(f"{out} holds blind predictions but no {CONFIG_NAME}; pass --overwrite to "
                             "replace them", file=str(out))
        return
    prev = old.get("fingerprint", {})
    if prev != fp:
        keys = sorted(k for k in set(prev) | set(fp) if prev.get(k) != fp.get(k))
        detail = "; ".join(f"{k}: {_short(prev.get(k))} -> {_short(fp.get(k))}" for k in keys[:4])
        raise InputError(f"{out} was written by a different configuration ({detail}); pass --overwrite to "
                         "discard it or choose another --out", file=str(out / CONFIG_NAME))


def _short(v: Any) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 80 else s[:77] + "..."


def open_output(out: Path, inputs: list) -> None:
    """Check ``out`` again just before the first write (a folder made there since the start is refused, not
    written into) and create it."""
    from ..hub.output import open_in_place

    open_in_place(out, command="blind", inputs=inputs, recognise=is_blind_output)


def reset_output(out: Path) -> None:
    """Remove our own files from ``out`` (``--overwrite``); foreign files are left alone."""
    from ..hub.output import remove_in_place

    remove_in_place(out, files=(MERGED_REL, CONFIG_NAME, "README.md", "manifest.json"), folders=("shards",))


def write_run_config(out: Path, payload: dict) -> None:
    from ..hub.output import write_json_atomic

    write_json_atomic(out / CONFIG_NAME, payload)


# ---------------------------------------------------------------------------------------- shards
def list_shards(out: Path) -> list[Path]:
    d = out / "shards"
    if not d.is_dir():
        return []
    return sorted(d / f for f in os.listdir(d) if SHARD_RE.match(f))


def next_seq(out: Path, rank: int) -> int:
    seqs = [int(m.group(2)) for p in list_shards(out) if (m := SHARD_RE.match(p.name)) and int(m.group(1)) == rank]
    return max(seqs) + 1 if seqs else 0


def done_ids(out: Path) -> set[str]:
    """Question IDs already written (merged file or any shard)."""
    import pyarrow.parquet as pq

    done: set[str] = set()
    paths = list_shards(out)
    if (out / MERGED_REL).exists():
        paths.append(out / MERGED_REL)
    for p in paths:
        done.update(pq.read_table(p, columns=["question_id"]).column(0).to_pylist())
    return done


class ShardWriter:
    """Accumulates rows of one process and writes ``shards/rank{r}-{seq}.parquet`` atomically."""

    def __init__(self, out: Path, rank: int, fail_after: int | None = None):
        self.dir = out / "shards"
        self.rank = rank
        self.seq = next_seq(out, rank)
        self.rows: list[dict] = []
        self.redacted = 0  # rows whose text carried a known secret (scrubbed before anything is written)
        self.written_rows = 0
        self.written_shards = 0
        self.fail_after = fail_after

    def add(self, rows: Iterable[dict]) -> None:
        """Queue rows; every text field passes :func:`audit_hub.scrub.redact` first (a model or server that
        echoes a key never gets it written), and the rows it changed are counted in :attr:`redacted`."""
        from ..scrub import redact

        for row in rows:
            hit = False
            for k in TEXT_FIELDS:
                row[k], changed = redact(row.get(k))
                hit = hit or changed
            self.redacted += hit
            self.rows.append(row)

    def flush(self) -> Path | None:
        if not self.rows:
            return None
        import pyarrow as pa

        from ..hub.shards import write_parquet_atomic

        table = pa.Table.from_pylist(self.rows, schema=arrow_schema())
        final = write_parquet_atomic(table, self.dir / f"rank{self.rank}-{self.seq:05d}.parquet")
        self.seq += 1
        self.written_rows += len(self.rows)
        self.written_shards += 1
        self.rows = []
        if self.fail_after is not None and self.written_shards >= self.fail_after:
            # Test hook (BENCHAUDIT_BLIND_FAIL_AFTER_SHARDS): die like a killed process would.
            os._exit(17)
        return final


# ---------------------------------------------------------------------------------------- merge
def merge(out: Path, question_order: list[str], keep_shards: bool = False):
    """Merge the merged file (if any) and all shards into ``data/blind-00000-of-00001.parquet``.

    Rows are de-duplicated by question ID (first occurrence wins) and ordered as the questions table;
    IDs not in it (from an earlier, larger run) follow in sorted order. Returns the merged pandas
    DataFrame.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards = list_shards(out)
    parts = []
    merged_path = out / MERGED_REL
    if merged_path.exists():
        parts.append(_conform(pq.read_table(merged_path)))
    for p in shards:
        parts.append(_conform(pq.read_table(p)))
    table = pa.concat_tables(parts) if parts else arrow_schema().empty_table()
    qids = [str(q) for q in table.column("question_id").to_pylist()]
    first: dict[str, int] = {}
    for j, q in enumerate(qids):
        first.setdefault(q, j)
    rank = {q: i for i, q in enumerate(question_order)}
    big = len(rank)
    keep = sorted(first, key=lambda q: (rank.get(q, big), q))
    table = table.take(pa.array([first[q] for q in keep], type=pa.int64()))
    from ..hub.output import remove_empty_folder, remove_file
    from ..hub.shards import write_parquet_atomic

    write_parquet_atomic(table, merged_path)
    if not keep_shards:
        for p in shards:
            remove_file(p)
        remove_empty_folder(out / "shards")
    return table.to_pandas()


def _image_sentence(summary: dict) -> str:
    mode = summary.get("image_mode", "none")
    text = ("Images were dropped (image mode `none`: text only)." if mode == "none" else
            "Every image was replaced by one blank white image at the processor's default size (image mode "
            "`blank`).")
    style = summary.get("prompt_style")
    served = summary.get("backend") == "openai"
    return text + (f" Prompt style `{style}`." if style else " Custom prompt template.") + (
        " Served model through an OpenAI-compatible API (no image was sent)." if served else "")


def _truncation_sentence(summary: dict) -> str:
    """The prompts cut to the model's context (``--truncate left``), as the console says: the audit counts
    them too (``readers.pairing.truncation_note``)."""
    n, total = summary.get("n_truncated") or 0, summary.get("n_questions") or 0
    if not n:
        return ""
    return (f" {n:,} of {total:,} prompts were longer than the model's context and lost their first tokens "
            "(`--truncate left`; rows marked `truncated`): a blind answer there saw less of the question.")


def card_body(model_name: str, summary: dict, questions_spec: str) -> str:
    """The Markdown body of the blind output's card (input-derived names escaped for where they land)."""
    from ..escape import md_code

    acc = summary.get("accuracy_exact")
    acc_s = "n/a" if acc is None else f"{acc:.4f}"
    return (
        f"# Blind (text-only) predictions of {md_code(model_name, 200)}\n\n"
        f"Questions: {md_code(questions_spec, 300)}. " + _image_sentence(summary) + " Hints and options were kept."
        + _truncation_sentence(summary) + "\n"
        "Produced by `benchaudit blind`; rows follow the benchaudit runs schema (`question_id`, `model`, "
        "`arm` = `blind`, `prediction`, `answer`, `hit_exact`) plus `option_logprobs` (normalised log "
        "probabilities over the option letters) and `gold_prob`.\n\n"
        f"- questions scored: {summary.get('n_questions')}\n"
        f"- exact-match accuracy: {acc_s}\n"
        f"- mean probability of the gold answer: {summary.get('mean_gold_prob')}\n\n"
        "The settings and model fingerprint are in `run_config.json`; every file's sha256 in `manifest.json`.\n"
    )


def finish_output(out: Path, summary: dict, questions_spec: str, *, inputs: list, command_line: list[str] | None,
                  started_at: float | None = None) -> None:
    """Write the card and the manifest of a complete blind output (through the output layer), so that the
    folder is pushable with ``benchaudit push`` like every other output."""
    from ..hub.card import configs as hub_configs
    from ..hub.output import finish_in_place

    model = summary.get("model") or "model"
    files = {"blind": [MERGED_REL]}
    header = {"configs": hub_configs(files, default="blind", names={"blind": "default"}),
              "tags": ["benchaudit", "blind-baseline"]}
    keep = ("model", "n_questions", "n_new", "n_resumed", "accuracy_exact", "mean_gold_prob", "n_truncated",
            "image_mode", "prompt_style", "backend", "processes", "n_failed", "scoring", "cpu_threads")
    finish_in_place(out, command="blind", files=files, header=header, body=card_body(model, summary, questions_spec),
                    command_line=command_line, inputs=inputs, started_at=started_at, names={"blind": "default"},
                    fields={"params": {k: summary.get(k) for k in keep if k in summary}})
