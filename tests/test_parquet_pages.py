"""The page decoder of repeated dictionary chunks (audit_hub.readers.parquet_pages) against pyarrow's own
reader, on files pyarrow writes: data page v1 and v2, every codec, nulls, many pages, bit widths 0-20, a
writer that falls back to plain values, a different dictionary in one row group."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from audit_hub.readers import fileio
from audit_hub.readers import parquet_pages as pp


def _write(path, n_groups: int, rows: int, n_dict: int, *, nulls: float = 0.0, seed: int = 0, **kw) -> None:
    """A question-ID column as a categorical (one dictionary of ``n_dict`` values repeated in every group)."""
    rng = np.random.default_rng(seed)
    cats = pa.array([f"q{i:07d}" for i in range(n_dict)])
    with pq.ParquetWriter(path, pa.schema([("question_id", pa.dictionary(pa.int32(), pa.string())),
                                           ("model", pa.string()), ("hit", pa.bool_())]), **kw) as w:
        for _ in range(n_groups):
            idx = rng.integers(0, n_dict, rows).astype(np.int32)
            if rows > 50:
                idx[:40] = n_dict - 1  # a run: the hybrid's RLE branch
            mask = rng.random(rows) < nulls if nulls else None
            qid = pa.DictionaryArray.from_arrays(pa.array(idx, mask=mask), cats)
            w.write_table(pa.table({"question_id": qid, "model": pa.array(rng.choice(["a", "b"], rows)),
                                    "hit": pa.array(rng.random(rows) < 0.5)}))


def _decode_all(path) -> tuple[int, int]:
    """Decode every group's question_id chunk and compare with pyarrow; (groups decoded, groups refused)."""
    pf = pq.ParquetFile(path, read_dictionary=["question_id"])
    leaf = pf.schema.column(0)
    ok = refused = 0
    with open(path, "rb") as fh:
        for g in range(pf.num_row_groups):
            meta = pf.metadata.row_group(g).column(0)
            off, ln = pp.chunk_span(meta)
            fh.seek(off)
            raw = fh.read(ln)
            arr = pf.read_row_group(g, columns=["question_id"]).column(0).chunks[0]
            try:
                idx = pp.chunk_indices(raw, len(arr.dictionary), meta.compression, meta.num_values,
                                       leaf.max_definition_level)
            except pp.Unsupported:
                refused += 1
                continue
            assert np.array_equal(idx, arr.indices.fill_null(-1).to_numpy()), g
            ok += 1
    return ok, refused


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("codec", ["NONE", "SNAPPY", "GZIP", "ZSTD", "LZ4"])
def test_indices_match_pyarrow_for_every_codec_and_page_version(tmp_path, version, codec):
    p = tmp_path / "r.parquet"
    _write(p, 3, 5000, 3000, nulls=0.1, compression=codec, data_page_version=version, data_page_size=4096)
    ok, refused = _decode_all(p)
    if codec == "LZ4":  # pyarrow names the raw and the Hadoop-framed codec alike: not decoded here, pyarrow reads it
        assert (ok, refused) == (0, 3)
    else:
        assert (ok, refused) == (3, 0)


@pytest.mark.parametrize("n_dict", [1, 2, 3, 255, 256, 4097, 1 << 20])
def test_every_bit_width(tmp_path, n_dict):
    p = tmp_path / "r.parquet"
    _write(p, 2, 3000, n_dict, seed=n_dict)
    assert _decode_all(p) == (2, 0)


def test_hand_built_hybrid_stream():
    # RLE run of 5 x 7 (bit width 3: one value byte), then one bit-packed group of 8 values 0..7
    rle = bytes([5 << 1, 7])
    vals = list(range(8))
    bits = 0
    for i, v in enumerate(vals):
        bits |= v << (3 * i)
    packed = bytes([(1 << 1) | 1]) + bits.to_bytes(3, "little")
    assert pp.decode_hybrid(rle + packed, 3, 13).tolist() == [7] * 5 + vals
    assert pp.decode_hybrid(rle + packed, 3, 10).tolist() == [7] * 5 + vals[:5]
    with pytest.raises(pp.Unsupported):
        pp.decode_hybrid(rle, 3, 6)  # the stream ends before the count
    for hostile in (bytes([1]), bytes([0]), bytes([0x80] * 12), bytes([3, 0xFF])):
        with pytest.raises(pp.Unsupported):  # an empty run (no progress), a runaway varint, a cut group
            pp.decode_hybrid(hostile, 3, 4)


def test_a_page_claiming_more_than_the_chunk_is_refused(tmp_path):
    p = tmp_path / "r.parquet"
    _write(p, 2, 3000, 500)
    meta = pq.ParquetFile(p).metadata.row_group(1).column(0)
    with open(p, "rb") as fh:
        fh.seek(meta.dictionary_page_offset)
        raw = fh.read(meta.total_compressed_size)
    assert len(pp.chunk_indices(raw, 500, meta.compression, meta.num_values, 1,
                                max_page_bytes=meta.total_uncompressed_size)) == 3000
    with pytest.raises(pp.Unsupported):  # a header's size is not believed past the footer's
        pp.chunk_indices(raw, 500, meta.compression, meta.num_values, 1, max_page_bytes=10)


def test_a_footer_span_outside_the_file_is_not_read(tmp_path):
    p = tmp_path / "r.parquet"
    _write(p, 2, 100, 10)
    meta = pq.ParquetFile(p).metadata.row_group(1).column(0)
    size = p.stat().st_size
    assert pp.chunk_span(meta, size) is not None
    assert pp.chunk_span(meta, meta.dictionary_page_offset + meta.total_compressed_size - 1) is None


def test_a_plain_fallback_page_is_refused_and_pyarrow_reads_it(tmp_path):
    # a dictionary too big for its page limit: the writer switches to plain values within the chunk
    p = tmp_path / "r.parquet"
    n = 60000
    pq.write_table(pa.table({"question_id": pa.array([f"question-{i:09d}" for i in range(n)]),
                             "model": pa.array(["m"] * n), "hit": pa.array([True] * n)}),
                   p, dictionary_pagesize_limit=50_000, row_group_size=30000)
    meta = pq.ParquetFile(p).metadata.row_group(0).column(0)
    assert "PLAIN" in meta.encodings and meta.has_dictionary_page
    with open(p, "rb") as fh:
        fh.seek(meta.dictionary_page_offset)
        raw = fh.read(meta.total_compressed_size)
    with pytest.raises(pp.Unsupported):
        pp.chunk_indices(raw, 10**9, meta.compression, meta.num_values, 1)
    a = fileio.read_parquet_runs(str(p))
    assert a["question_id"].astype(str).tolist() == [f"question-{i:09d}" for i in range(n)]


def _count_fast(monkeypatch) -> list:
    seen: list = []
    orig = fileio._RepeatedDictionaries.columns

    def spy(self, g):
        out = orig(self, g)
        seen.append((g, sorted(out)))
        return out

    monkeypatch.setattr(fileio._RepeatedDictionaries, "columns", spy)
    return seen


@pytest.mark.parametrize("nulls", [0.0, 0.2])
def test_the_run_reader_gives_pyarrows_frame_and_uses_the_pages(tmp_path, monkeypatch, nulls):
    p = tmp_path / "r.parquet"
    _write(p, 6, 4000, 5000, nulls=nulls, data_page_size=8192)
    with monkeypatch.context() as m:
        m.setattr(fileio._RepeatedDictionaries, "columns", lambda self, g: {})
        slow = fileio.read_parquet_runs(str(p))
    seen = _count_fast(monkeypatch)
    fast = fileio.read_parquet_runs(str(p))
    assert fast.equals(slow)
    assert sum(1 for _, cols in seen if "question_id" in cols) == 5  # every group after the reference one
    # the nulls survive as missing values, not as a code of the dictionary
    assert int(fast["question_id"].isna().sum()) == int(slow["question_id"].isna().sum())
    if nulls:
        assert fast["question_id"].isna().any()


def test_a_group_with_another_dictionary_is_read_by_pyarrow(tmp_path, monkeypatch):
    p = tmp_path / "r.parquet"
    schema = pa.schema([("question_id", pa.dictionary(pa.int32(), pa.string())), ("model", pa.string()),
                        ("hit", pa.bool_())])
    d1, d2 = pa.array(["a", "b", "c"]), pa.array(["c", "d", "a"])
    with pq.ParquetWriter(p, schema) as w:
        for d in (d1, d1, d2, d1):
            w.write_table(pa.table({"question_id": pa.DictionaryArray.from_arrays(pa.array([0, 1, 2], pa.int32()), d),
                                    "model": ["m"] * 3, "hit": [True] * 3}))
    seen = _count_fast(monkeypatch)
    a = fileio.read_parquet_runs(str(p))
    assert a["question_id"].astype(str).tolist() == list("abc" "abc" "cda" "abc")
    assert [("question_id" in cols) for _, cols in sorted(seen)] == [True, False, True]  # (threads: any order)


def test_a_pandas_categorical_file(tmp_path, monkeypatch):
    # what pandas writes: the categorical's whole categories as the dictionary of every row group
    n = 9000
    df = pd.DataFrame({"question_id": pd.Categorical([f"q{i % 3000}" for i in range(n)]),
                       "model": np.repeat(["m1", "m2", "m3"], n // 3), "hit": np.arange(n) % 2 == 0})
    p = tmp_path / "r.parquet"
    df.to_parquet(p, row_group_size=2000)
    seen = _count_fast(monkeypatch)
    a = fileio.read_parquet_runs(str(p))
    assert a["question_id"].astype(str).tolist() == df["question_id"].astype(str).tolist()
    assert sum(1 for _, cols in seen if "question_id" in cols) == pq.ParquetFile(p).num_row_groups - 1


def test_a_media_column_before_the_id_does_not_shift_the_leaf(tmp_path, monkeypatch):
    # an image struct (two Parquet leaves) ahead of question_id: the leaf index is not the field index
    n = 3000
    img = pa.array([{"bytes": b"x", "path": f"p{i}"} for i in range(n)])
    cats = pa.array([f"q{i}" for i in range(500)])
    p = tmp_path / "r.parquet"
    with pq.ParquetWriter(p, pa.schema([("image", img.type), ("question_id", pa.dictionary(pa.int32(), pa.string())),
                                        ("model", pa.string()), ("hit", pa.bool_())])) as w:
        for g in range(3):
            idx = pa.array((np.arange(n) * 7 + g) % 500, pa.int32())
            w.write_table(pa.table({"image": img, "question_id": pa.DictionaryArray.from_arrays(idx, cats),
                                    "model": ["m"] * n, "hit": [True] * n}))
    seen = _count_fast(monkeypatch)
    a = fileio.read_parquet_runs(str(p))
    want = [f"q{(i * 7 + g) % 500}" for g in range(3) for i in range(n)]
    assert a["question_id"].astype(str).tolist() == want
    assert sum(1 for _, cols in seen if "question_id" in cols) == 2


def test_a_real_pool_rewritten_as_pandas_categoricals_reads_the_same(tmp_path, monkeypatch):
    # BLINK's 19 real models (tests/fixtures/real_pools/blink), written the way pandas writes a categorical
    # question ID in row groups: every group after the first goes through the page decoder
    from pathlib import Path

    src = Path(__file__).parent / "fixtures" / "real_pools" / "blink" / "runs.parquet"
    r = pd.read_parquet(src)
    r["question_id"] = r["question_id"].astype("category")
    p = tmp_path / "runs.parquet"
    r.to_parquet(p, row_group_size=4000)
    seen = _count_fast(monkeypatch)
    a = fileio.read_parquet_runs(str(p))
    b = fileio.read_parquet_runs(str(src))
    assert sum(1 for _, cols in seen if "question_id" in cols) == pq.ParquetFile(p).num_row_groups - 1 >= 5
    for c in b.columns:
        assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), c


def test_a_corrupted_chunk_decodes_to_pyarrows_indices_or_is_refused(tmp_path):
    # hostile bytes: flipped, zeroed or cut anywhere in the chunk. The decoder returns the right number of
    # in-range indices or raises Unsupported (the caller then asks pyarrow), never another exception.
    p = tmp_path / "r.parquet"
    _write(p, 2, 3000, 700, nulls=0.1, data_page_size=2048)
    meta = pq.ParquetFile(p).metadata.row_group(1).column(0)
    with open(p, "rb") as fh:
        fh.seek(meta.dictionary_page_offset)
        raw = fh.read(meta.total_compressed_size)
    rng = np.random.default_rng(3)
    refused = 0
    for trial in range(300):
        b = bytearray(raw)
        kind = trial % 3
        at = int(rng.integers(0, len(b)))
        if kind == 0:
            b[at] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            b[at:at + 16] = bytes(min(16, len(b) - at))
        else:
            b = b[:at]
        try:
            idx = pp.chunk_indices(bytes(b), 700, meta.compression, meta.num_values, 1,
                                   max_page_bytes=meta.total_uncompressed_size)
        except pp.Unsupported:
            refused += 1
            continue
        assert len(idx) == meta.num_values and idx.max() < 700 and idx.min() >= -1
    assert refused > 100  # most damage is seen (a flip inside the packed indices may not be)
