"""Dictionary indices of a Parquet column chunk, decoded from its pages, for a chunk whose dictionary page
repeats one already read (issue 30).

A pandas categorical column, or a batch writer's dictionary column, stores the same dictionary page in every
row group: at 1M questions x 50 models x 2 arms, the question ID's 1M-entry dictionary 100 times. pyarrow's
``read_dictionary`` reader inserts every row group's dictionary into a hash table before it decodes the indices
(about 0.3 s per 1M-entry dictionary on this machine, 33 CPU-seconds for the file), although the dictionary is
byte for byte the one of the row group before. Here the chunk's raw dictionary page is compared with the
reference chunk's (a byte comparison, no decoding); where it is the same, only the data pages are decoded:
the Thrift page headers, the codec, the definition levels and the RLE / bit-packed hybrid indices, vectorised
in numpy. The caller (:func:`.fileio.read_parquet_runs`) pairs the indices with the reference chunk's
dictionary as pyarrow decoded it, so the shared code space maps them through the remap it already holds.

Only what this path understands is decoded: a flat column (no repetition levels, at most one definition
level), data pages v1 or v2 whose values are ``RLE_DICTIONARY`` / ``PLAIN_DICTIONARY``, and the codecs
uncompressed, Snappy, gzip and Zstandard. Anything else (a writer that fell back to plain values in a
later page, another codec such as LZ4 or Brotli, a malformed header, a count that does not add up) raises
:class:`Unsupported` and the caller reads the row group with pyarrow: this module is a shortcut, never
the only reader. Its output is checked against pyarrow's on files written by pyarrow itself (data page
v1/v2, every codec above, nulls, page sizes, bit widths 0-20: ``tests/test_parquet_pages.py``).

Parquet's formats: ``parquet.thrift`` (PageHeader and its parts) and the "Encodings" document (the
RLE / bit-packing hybrid), apache/parquet-format; Thrift's compact protocol specification.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# parquet.thrift enums
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 2, 3, 8  # (BIT_PACKED = 4, deprecated levels: refused)
# (pyarrow's metadata names one "LZ4" for the Hadoop framing and the raw codec: refused, pyarrow reads those)
_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd"}


class Unsupported(Exception):
    """This chunk is not one the fast path decodes (the caller falls back to pyarrow)."""


# ---------------------------------------------------------------- Thrift compact protocol (the page headers)
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise Unsupported("truncated varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _skip(buf: bytes, pos: int, t: int, depth: int = 0) -> int:
    """Skip one value of compact type ``t`` starting at ``pos``."""
    if depth > 16:
        raise Unsupported("nesting")
    if t in (1, 2):  # bool in a struct field: the value is in the type nibble
        return pos
    if t == 3:
        return pos + 1
    if t in (4, 5, 6):
        return _varint(buf, pos)[1]
    if t == 7:
        return pos + 8
    if t == 8:
        n, pos = _varint(buf, pos)
        return pos + n
    if t in (9, 10):
        h = buf[pos]
        pos += 1
        n, et = h >> 4, h & 0x0F
        if n == 15:
            n, pos = _varint(buf, pos)
        for _ in range(n):
            pos = pos + 1 if et in (1, 2) else _skip(buf, pos, et, depth + 1)
        return pos
    if t == 11:
        n, pos = _varint(buf, pos)
        if n:
            kv = buf[pos]
            pos += 1
            for _ in range(n):
                pos = _skip(buf, pos, kv >> 4, depth + 1)
                pos = _skip(buf, pos, kv & 0x0F, depth + 1)
        return pos
    if t == 12:
        return _struct(buf, pos, depth + 1)[1]
    raise Unsupported(f"thrift type {t}")


def _struct(buf: bytes, pos: int, depth: int = 0) -> tuple[dict, int]:
    """A compact-protocol struct as {field id: int | bool | dict (nested struct)}; other values skipped."""
    out: dict = {}
    fid = 0
    while True:
        if pos >= len(buf):
            raise Unsupported("truncated struct")
        h = buf[pos]
        pos += 1
        if h == 0:
            return out, pos
        t, delta = h & 0x0F, h >> 4
        if delta:
            fid += delta
        else:
            v, pos = _varint(buf, pos)
            fid = _zigzag(v)
        if t in (1, 2):
            out[fid] = t == 1
        elif t in (4, 5, 6):
            v, pos = _varint(buf, pos)
            out[fid] = _zigzag(v)
        elif t == 12:
            if depth > 16:
                raise Unsupported("nesting")
            out[fid], pos = _struct(buf, pos, depth + 1)
        else:
            pos = _skip(buf, pos, t, depth)


# ---------------------------------------------------------------- the RLE / bit-packing hybrid
def unpack_bits(data: bytes, bit_width: int, count: int) -> np.ndarray:
    """``count`` unsigned ``bit_width``-bit integers (1-32) packed least-significant bit first (Parquet's
    bit-packing), as int64; vectorised: each value read from the five bytes that hold it."""
    if count == 0:
        return np.zeros(0, np.int64)
    if not 1 <= bit_width <= 32 or len(data) * 8 < count * bit_width:
        raise Unsupported("bit-packed run shorter than its count")
    raw = np.frombuffer(bytes(data) + b"\0" * 8, dtype=np.uint8)
    bitpos = np.arange(count, dtype=np.int64) * bit_width
    byte = bitpos >> 3
    v = raw[byte].astype(np.uint64)
    for k in range(1, 5):
        v |= raw[byte + k].astype(np.uint64) << np.uint64(8 * k)
    v >>= (bitpos & 7).astype(np.uint64)
    v &= np.uint64((1 << bit_width) - 1)
    return v.astype(np.int64)


def decode_hybrid(buf: bytes, bit_width: int, count: int) -> np.ndarray:
    """The first ``count`` values of an RLE / bit-packing hybrid stream (no length prefix) as int64."""
    if bit_width == 0:
        return np.zeros(count, np.int64)
    if bit_width > 32:
        raise Unsupported("bit width over 32")
    vbytes = (bit_width + 7) // 8
    segs: list[tuple[int, int, int]] = []  # (kind 0 = RLE value / 1 = bit-packed, count, value or packed offset)
    packed: list[bytes] = []
    n_packed = 0
    pos = got = 0
    mv = memoryview(buf)
    while got < count:
        h, pos = _varint(buf, pos)
        if h & 1:
            n, nb = (h >> 1) * 8, (h >> 1) * bit_width
            if n == 0 or pos + nb > len(buf):
                raise Unsupported("empty or truncated bit-packed run")
            packed.append(mv[pos:pos + nb])
            segs.append((1, n, n_packed))
            n_packed += n
        else:
            n, nb = h >> 1, vbytes
            if n == 0 or pos + nb > len(buf):
                raise Unsupported("empty or truncated RLE run")
            segs.append((0, n, int.from_bytes(buf[pos:pos + nb], "little")))
        pos += nb
        got += n
    unpacked = unpack_bits(b"".join(packed), bit_width, n_packed) if n_packed else np.zeros(0, np.int64)
    parts = [unpacked[v:v + n] if kind else np.full(n, v, np.int64) for kind, n, v in segs]
    out = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return out[:count]


# ---------------------------------------------------------------- one column chunk
def chunk_span(meta_col, file_size: int | None = None) -> tuple[int, int] | None:
    """(file offset, byte length) of a column chunk that starts with a dictionary page; None otherwise, or
    when the footer's span does not lie inside a file of ``file_size`` bytes."""
    d = meta_col.dictionary_page_offset
    if d is None or not meta_col.has_dictionary_page:
        return None
    start, length = int(d), int(meta_col.total_compressed_size)
    if start < 0 or length <= 0 or (file_size is not None and start + length > file_size):
        return None
    return start, length


def _guarded(fn):
    """Any failure of the decoder on a malformed chunk (an index past the end, a bad size) is
    :class:`Unsupported`, never another exception: the caller then reads the group with pyarrow, which
    reports the file as unreadable if it is."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (IndexError, ValueError, OverflowError, TypeError, KeyError, MemoryError) as e:
            raise Unsupported(f"malformed chunk ({type(e).__name__})") from None

    return wrapper


@_guarded
def dictionary_page_bytes(chunk: bytes) -> bytes:
    """The raw (compressed) dictionary page of a chunk, header included: what two chunks must share byte for
    byte for their dictionaries to be the same."""
    hdr, pos = _struct(chunk, 0)
    if hdr.get(1) != _DICTIONARY_PAGE or 3 not in hdr:
        raise Unsupported("the chunk does not start with a dictionary page")
    return chunk[:pos + int(hdr[3])]


def _decompress(data: bytes, codec: str | None, size: int) -> bytes:
    if codec is None:
        return bytes(data)
    try:
        return pa.decompress(data, decompressed_size=size, codec=codec, asbytes=True)
    except (pa.ArrowException, ValueError, OSError) as e:
        raise Unsupported(f"codec {codec}: {e}") from None


@_guarded
def chunk_indices(chunk: bytes, dict_len: int, compression: str, num_values: int, max_def: int,
                  max_page_bytes: int | None = None) -> np.ndarray:
    """int32 dictionary indices of every value slot of a flat column chunk (-1 for a null), decoded from the
    data pages that follow its dictionary page. ``max_page_bytes``: the largest uncompressed page accepted
    (the footer's uncompressed size of the chunk: a page header claiming more is not believed, nothing that
    size is allocated). Raises :class:`Unsupported` for anything else."""
    if compression not in _CODECS:
        raise Unsupported(f"codec {compression}")
    codec = _CODECS[compression]
    if max_def > 1:
        raise Unsupported("nested column")
    hdr, pos = _struct(chunk, 0)
    if hdr.get(1) != _DICTIONARY_PAGE:
        raise Unsupported("no dictionary page")
    pos += int(hdr[3])
    out = np.empty(num_values, dtype=np.int32)
    filled = 0
    while filled < num_values:
        hdr, pos = _struct(chunk, pos)
        kind, usize, csize = hdr.get(1), hdr.get(2), hdr.get(3)
        if usize is None or csize is None or csize < 0 or usize < 0 or pos + csize > len(chunk) \
                or (max_page_bytes is not None and usize > max_page_bytes):
            raise Unsupported("bad page header")
        body = chunk[pos:pos + csize]
        pos += csize
        if kind == _DATA_PAGE:
            dp = hdr.get(5)
            if not isinstance(dp, dict) or dp.get(2) not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
                raise Unsupported("data page not dictionary-encoded")
            n = int(dp[1])
            page = _decompress(body, codec, int(usize))
            p = 0
            valid = None
            if max_def:
                if dp.get(3) != _RLE:
                    raise Unsupported("definition levels not RLE")
                ln = int.from_bytes(page[0:4], "little")
                valid = decode_hybrid(page[4:4 + ln], 1, n) == 1
                p = 4 + ln
        elif kind == _DATA_PAGE_V2:
            dp = hdr.get(8)
            if not isinstance(dp, dict) or dp.get(4) not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
                raise Unsupported("data page not dictionary-encoded")
            n = int(dp[1])
            rl, dl = int(dp.get(6, 0)), int(dp.get(5, 0))
            if rl:
                raise Unsupported("repetition levels")
            levels = body[:dl]
            values = body[dl:]
            if dp.get(7, True):
                values = _decompress(values, codec, int(usize) - dl)
            valid = decode_hybrid(levels, 1, n) == 1 if max_def else None
            page, p = values, 0
        elif kind == _DICTIONARY_PAGE:
            raise Unsupported("a second dictionary page")
        else:
            continue  # (an index page: skipped, as readers do)
        if n <= 0 or filled + n > num_values:
            raise Unsupported("page value counts do not add up")
        n_vals = n if valid is None else int(valid.sum())
        if n_vals:
            bw = page[p]
            idx = decode_hybrid(page[p + 1:], int(bw), n_vals)
        else:
            idx = np.zeros(0, np.int64)
        if len(idx) and (idx.max() >= dict_len or idx.min() < 0):
            raise Unsupported("index outside the dictionary")
        if valid is None:
            out[filled:filled + n] = idx
        else:
            seg = np.full(n, -1, np.int32)
            seg[valid] = idx
            out[filled:filled + n] = seg
        filled += n
    return out
