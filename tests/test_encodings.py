"""Nothing in the audit's outputs depends on how the runs file was encoded (issue 30), and the unifier
that maps per-piece dictionaries onto one code space (:class:`audit_hub.readers.fileio.SharedDictionary`)
gives the codes worked out by hand."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import audit_hub
from audit_hub.readers.fileio import SharedDictionary, read_parquet_runs, read_text_runs

TEXT = ("question_id", "model", "arm", "prediction", "answer")
DATA = files("audit_hub") / "data"


def _dict(indices, values, index_type=pa.int32()) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices, type=index_type), pa.array(values, type=pa.string()))


# ---------------------------------------------------------------------------------------- the unifier


def test_overlapping_and_reordered_dictionaries_share_one_code_space():
    sd = SharedDictionary(9)
    sd.add(_dict([0, 1, 1, 0], ["b", "a"]))          # b=0, a=1
    sd.add(_dict([0, 1, 2], ["a", "c", "b"]))        # a -> 1, c new -> 2, b -> 0
    sd.add(pa.array(["c", "d"]))                     # plain strings: encoded per piece; d new -> 3
    cat = sd.categorical()
    assert list(cat.categories) == ["b", "a", "c", "d"]
    assert cat.categories.dtype == object
    assert cat.codes.tolist() == [0, 1, 1, 0, 1, 2, 0, 2, 3]
    assert cat.codes.dtype == np.int8
    assert list(cat) == ["b", "a", "a", "b", "a", "c", "b", "c", "d"]


def test_nulls_in_indices_and_in_the_dictionary_become_minus_one():
    sd = SharedDictionary(None)
    sd.add(_dict([0, None, 1], ["x", "y"]))
    sd.add(pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], pa.int32()), pa.array(["y", None, "z"])))
    sd.add(pa.array([None, "x"], type=pa.string()))
    cat = sd.categorical()
    assert list(cat.categories) == ["x", "y", "z"]
    assert cat.codes.tolist() == [0, -1, 1, 1, -1, 2, -1, 0]


def test_a_dictionary_with_repeated_values_maps_them_to_one_code():
    sd = SharedDictionary(5)
    sd.add(_dict([0, 1, 2, 3, 2], ["p", "q", "p", "r"]))
    cat = sd.categorical()
    assert list(cat.categories) == ["p", "q", "r"]
    assert cat.codes.tolist() == [0, 1, 0, 2, 0]


def test_codes_widen_past_int8_and_int16_keeping_earlier_rows():
    sd = SharedDictionary(None)
    sd.add(pa.array([f"v{i}" for i in range(100)]))          # 100 values: int8
    assert sd.dtype == np.int8
    sd.add(pa.array([f"v{i}" for i in range(50, 200)]))      # 200 values: int16
    assert sd.dtype == np.int16
    pre = SharedDictionary(100 + 33000)
    pre.add(pa.array([f"w{i}" for i in range(100)]))
    pre.add(pa.array([f"w{i}" for i in range(33000)]))       # past int16: int32, the first rows kept
    cat, cat_pre = sd.categorical(), pre.categorical()
    assert cat.codes.dtype == np.int16 and cat_pre.codes.dtype == np.int32
    assert cat.codes.tolist() == list(range(100)) + list(range(50, 200))
    assert cat_pre.codes[:100].tolist() == list(range(100)) and cat_pre.codes[-1] == 32999
    assert cat_pre.categories[32999] == "w32999"


def test_a_repeated_dictionary_reuses_its_mapping_and_copies_identity_indices():
    d = pa.array(["m0", "m1", "m2"])
    sd = SharedDictionary(6)
    sd.add(pa.DictionaryArray.from_arrays(pa.array([2, 0, 1], pa.int32()), d))
    first = sd._prev_remap
    sd.add(pa.DictionaryArray.from_arrays(pa.array([1, 1, 2], pa.int32()), pa.array(["m0", "m1", "m2"])))
    assert sd._prev_remap is first and sd._identity  # equal dictionary: no lookup at all
    assert sd.categorical().codes.tolist() == [2, 0, 1, 1, 1, 2]


def test_a_free_text_column_with_many_values_goes_back_to_strings():
    sd = SharedDictionary(None, text=True)
    vals = [f"t{i}" for i in range(70_000)]
    sd.add(pa.array(vals))
    assert sd.too_many()
    assert sd.as_strings().to_pylist() == vals
    assert not SharedDictionary(None).too_many()


def test_bad_utf8_in_a_dictionary_is_refused():
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 1], np.int32).tobytes()),
                                                 pa.py_buffer(b"\xff")])
    with pytest.raises(pa.ArrowInvalid):
        SharedDictionary(1).add(bad)


# ---------------------------------------------------------------------------------------- readers


def _example_runs() -> pd.DataFrame:
    r = pd.read_parquet(str(DATA / "mathv_runs.parquet"))
    return r.astype({c: object for c in TEXT})


def test_every_encoding_reads_to_the_same_values(tmp_path):
    r = _example_runs().iloc[:3000]
    cat = r.astype({c: "category" for c in TEXT})
    paths = {"dict": tmp_path / "d.parquet", "rg": tmp_path / "rg.parquet", "plain": tmp_path / "p.parquet"}
    cat.to_parquet(paths["dict"], index=False)
    pq.write_table(pa.Table.from_pandas(r, preserve_index=False), paths["rg"], row_group_size=256)
    r.to_parquet(paths["plain"], index=False)
    r.to_json(tmp_path / "r.jsonl", orient="records", lines=True)
    r.to_csv(tmp_path / "r.csv", index=False)
    frames = {k: read_parquet_runs(str(p)) for k, p in paths.items()}
    frames["jsonl"] = read_text_runs(str(tmp_path / "r.jsonl"))
    frames["csv"] = read_text_runs(str(tmp_path / "r.csv"))
    for name, df in frames.items():
        assert df is not None, name
        assert "source_row" not in df.columns
        for c in TEXT:
            assert isinstance(df[c].dtype, pd.CategoricalDtype), (name, c)
            got = df[c].astype(object).where(df[c].notna(), None).tolist()
            want = r[c].tolist()
            if name == "csv" and c == "answer":  # CSV cannot tell "" from empty: both read as null
                want = [None if v == "" else v for v in want]
            assert got == want, (name, c)
    # a per-row-group dictionary (256-row groups) is one code space: model codes as the categories say
    rg = frames["rg"]["model"]
    assert list(rg.cat.categories) == list(pd.unique(r["model"])) and rg.cat.codes.dtype == np.int8


def _audit(questions: str, runs: Path, out: Path) -> Path:
    res = audit_hub.audit(questions, str(runs), calibration_sims=0, figures=False, n_permutations=99)
    res.save(out)
    return out


def _outputs(folder: Path) -> dict[str, bytes]:
    got = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "data").glob("*.parquet"))}
    got["summary.json"] = (folder / "summary.json").read_bytes()
    got["README.md"] = (folder / "README.md").read_bytes()
    return got


def test_the_bundled_example_audits_the_same_in_every_encoding(tmp_path):
    """Dictionary Parquet (pandas categoricals: sorted dictionaries), plain Parquet, per-row-group
    dictionaries (from a categorical and from plain strings), JSON lines and CSV of the same rows: the
    same summary.json, Parquet tables and card, byte for byte."""
    questions = str(DATA / "mathv_questions.parquet")
    r = _example_runs()
    cat = r.astype({c: "category" for c in TEXT})
    files_ = {
        "dict.parquet": lambda p: cat.to_parquet(p, index=False),
        "plain.parquet": lambda p: r.to_parquet(p, index=False),
        "rg_cat.parquet": lambda p: pq.write_table(pa.Table.from_pandas(cat, preserve_index=False), p,
                                                   row_group_size=1000),
        "rg_plain.parquet": lambda p: pq.write_table(pa.Table.from_pandas(r, preserve_index=False), p,
                                                     row_group_size=1000),
        "runs.jsonl": lambda p: r.to_json(p, orient="records", lines=True, force_ascii=False),
        "runs.csv": lambda p: r.to_csv(p, index=False),
    }
    outs = {}
    for name, write in files_.items():
        p = tmp_path / name
        write(p)
        outs[name] = _outputs(_audit(questions, p, tmp_path / f"out_{name.replace('.', '_')}"))
    ref = outs.pop("dict.parquet")
    assert len(ref) >= 4
    for name, got in outs.items():
        assert got.keys() == ref.keys(), name
        for k in ref:
            assert got[k] == ref[k], (name, k)
    # the model order follows the rows, not the (sorted) categorical dictionary of dict.parquet
    import json

    summary = json.loads(ref["summary.json"])
    order = [a["model"] for a in summary["accuracy"] if a["arm"] == "full"]
    first_seen = [m for m in pd.unique(r["model"]) if m in set(order)]
    assert order == first_seen


def test_first_appearance_matches_a_plain_scan():
    """The model numbering's helper (values sorted only at chunk starts and value changes) against the
    definition, on random codes with nulls, runs and chunk sizes."""
    from audit_hub.answers.codes import first_appearance

    rng = np.random.default_rng(3)
    for trial in range(300):
        k = int(rng.integers(1, 9))
        c = rng.integers(-1, k, size=int(rng.integers(0, 40))).astype(np.int16)
        if trial % 2:
            c = np.repeat(c, rng.integers(1, 5, size=len(c)))
        want = [x for x in dict.fromkeys(c.tolist()) if x >= 0]
        assert first_appearance(c, k, step=int(rng.integers(1, 12))).tolist() == want


def test_run_matched_dictionaries_give_the_codes_of_the_hash_lookup():
    """A piece dictionary made of runs of consecutive global values (a file sorted alike in every
    model block) is mapped by run matching; the codes must be those index_in gives, and anything else
    (a reordered value, a new value, too many runs) still takes the hash lookup."""
    sd = SharedDictionary(None)
    sd.add(pa.array([f"q{i}" for i in range(10)]))  # q0..q9 -> 0..9
    assert sd._runs(pa.array(["q7", "q8", "q9", "q0", "q1"])).tolist() == [7, 8, 9, 0, 1]
    assert sd._runs(pa.array(["q3", "q1"])).tolist() == [3, 1]  # two runs of one
    assert sd._runs(pa.array(["q3", "new"])) is None  # a new value: the general path
    assert sd._runs(pa.array([f"q{i}" for i in (0, 2, 4, 6, 8, 1, 3, 5, 7)])) is None  # nine runs > eight
    sd.add(pa.array(["q7", "q8", "q9", "q0", "q1", "q1"]))  # (dictionary q7 q8 q9 q0 q1: two runs)
    sd.add(pa.array(["q5", "new", "q9", "q4"]))  # general path; new -> 10
    sd.add(pa.array(["q9", "new", "q0"]))  # runs: q9 (9), new (10), q0 (0)
    cat = sd.categorical()
    assert list(cat.categories) == [f"q{i}" for i in range(10)] + ["new"]
    assert cat.codes.tolist() == list(range(10)) + [7, 8, 9, 0, 1, 1] + [5, 10, 9, 4] + [9, 10, 0]
