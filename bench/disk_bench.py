"""Where the bytes of the embedded store go on W1: files, blocks, tables, and the codec's streams per kind.

    .venv/bin/python bench/disk_bench.py [--days 7] [--out bench/out] [--end-offset-minutes 0]
                                         [--batch-minutes 60] [--data-dir DIR]

Builds the W1-like week of ``core_bench.py`` (same generator, same time-order ingest in
``--batch-minutes`` batches, data ending ``--end-offset-minutes`` after now) into
``<out>/disk/samples.duckdb``, checkpoints and closes it (or, with ``--data-dir``, reads an existing data
directory instead), then prints:

- each file's bytes and B/sample (the store's total is what ``core_bench`` prints);
- per DuckDB file, ``PRAGMA database_size``: block size, used and free blocks;
- per table and column, the bytes of its column segments (``pragma_storage_info``: a segment runs from
  its offset to the next segment's offset in the same block; the last one in a block is charged with the
  block's unused tail, so these are upper bounds, and blocks no segment names are metadata);
- the sealed chunks per series name and per kind (counters, gauges, histogram buckets, histogram
  ``_sum``/``_count``): chunks, samples, and the bytes of the timestamp and value blobs per sample, with
  the value encodings used (the first byte of ``val_enc``: decimals, near-decimal or raw XOR).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from core_bench import MIN, STEP_MS, generate, ingest  # noqa: E402

from servemetrics.store import STORE_FILE  # noqa: E402
from servemetrics.store.duckdb import DuckDBStore  # noqa: E402


def kind_of(name: str) -> str:
    """The kind of series a W1 name is, for the per-kind totals."""
    if name.endswith("_bucket"):
        return "histogram buckets"
    if name.endswith(("_sum", "_count")):
        return "histogram _sum/_count"
    if name.endswith("_total"):
        return "counters"
    return "gauges"


def build(out: Path, days: float, end_offset_minutes: float, batch_minutes: float) -> Path:
    """The core_bench week in ``out``, checkpointed and closed; the main file's path."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    end_ms = int(time.time() * 1000 + end_offset_minutes * MIN) // STEP_MS * STEP_MS + STEP_MS
    keys, ts, matrix = generate(days, end_ms)
    store = DuckDBStore(out / STORE_FILE)
    rate = ingest(store, keys, ts, matrix, batch_minutes)
    store.checkpoint()
    st = store.stats()
    store.close()
    print(f"built {matrix.size:,} samples in {len(keys)} series ({rate:,.0f} samples/s through append)")
    print(f"store.stats().bytes after checkpoint: {st.bytes:,} = {st.bytes / matrix.size:.3f} B/sample")
    return out / STORE_FILE


def segment_bytes(con: duckdb.DuckDBPyConnection, db: str, block_size: int) -> dict[tuple[str, str], int]:
    """Bytes per (table, column) of ``db`` by segment offsets (see the module docstring), plus
    ``("(metadata)", "")`` for used blocks no segment names."""
    tables = [
        r[0]
        for r in con.execute(
            f"SELECT table_name FROM duckdb_tables() WHERE database_name = '{db}'"
        ).fetchall()
    ]
    per_block: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    extra: Counter[tuple[str, str]] = Counter()
    seen: set[int] = set()
    for t in tables:
        rows = con.execute(
            f"SELECT column_name, block_id, block_offset, additional_block_ids"
            f" FROM pragma_storage_info('{db}.{t}') WHERE persistent AND block_id >= 0"
        ).fetchall()
        for col, block, offset, more in rows:
            per_block[block].append((offset, t, col))
            for b in more or []:
                extra[(t, col)] += block_size
                seen.add(b)
    out: Counter[tuple[str, str]] = Counter(extra)
    for block, segs in per_block.items():
        seen.add(block)
        segs.sort()
        ends = [o for o, _, _ in segs[1:]] + [block_size]
        for (o, t, col), e in zip(segs, ends, strict=True):
            out[(t, col)] += e - o
    used = con.execute(
        f"SELECT used_blocks FROM pragma_database_size() WHERE database_name = '{db}'"
    ).fetchone()
    out[("(metadata)", "")] = (int(used[0]) - len(seen)) * block_size if used else 0
    return dict(out)


def report(main: Path) -> None:
    head = main.with_name(f"{main.stem}.head{main.suffix}")
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{main}' AS sm (READ_ONLY)")
    con.execute(f"ATTACH '{head}' AS hd (READ_ONLY)")
    chunk_n = con.execute("SELECT coalesce(sum(n), 0) FROM sm.chunks").fetchone()[0]  # type: ignore[index]
    head_n = con.execute("SELECT count(*) FROM hd.head").fetchone()[0]  # type: ignore[index]
    n = int(chunk_n) + int(head_n)
    print(f"\nsamples: {n:,} ({chunk_n:,} sealed in chunks, {head_n:,} in head)")
    print("\nfiles:")
    total = 0
    for p in (main, Path(f"{main}.wal"), head, Path(f"{head}.wal")):
        size = p.stat().st_size if p.exists() else 0
        total += size
        print(f"  {p.name:28s} {size:>12,} B  {size / n:6.3f} B/sample")
    print(f"  {'total':28s} {total:>12,} B  {total / n:6.3f} B/sample")
    print("\nblocks (PRAGMA database_size):")
    for db in ("sm", "hd"):
        r = con.execute(
            "SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size()"
            f" WHERE database_name = '{db}'"
        ).fetchone()
        assert r is not None
        bs, tot, used, free = (int(x) for x in r)
        print(
            f"  {db}: {bs:,} B blocks, {tot} total, {used} used ({used * bs / n:.3f} B/sample),"
            f" {free} free ({free * bs / n:.3f} B/sample)"
        )
        sizes = segment_bytes(con, db, bs)
        by_table: Counter[str] = Counter()
        for (t, _), b in sizes.items():
            by_table[t] += b
        for t, b in sorted(by_table.items(), key=lambda x: -x[1]):
            cols = ", ".join(
                f"{c} {v / n:.3f}"
                for (tt, c), v in sorted(sizes.items(), key=lambda x: -x[1])
                if tt == t and c
            )
            print(f"    {t:12s} {b:>11,} B  {b / n:6.3f} B/sample   {cols}")
    rows = con.execute(
        "SELECT s.name, count(*), sum(c.n), sum(octet_length(c.ts_enc)), sum(octet_length(c.val_enc)),"
        " list(left(hex(c.val_enc), 2))"
        " FROM sm.chunks c JOIN sm.series s ON s.id = c.series_id GROUP BY 1 ORDER BY 1"
    ).fetchall()
    roll = con.execute("SELECT count(*) FROM sm.rollups").fetchone()[0]  # type: ignore[index]
    print(f"\nsealed chunks by series name (B per sealed sample; {roll:,} rollup rows):")
    print(f"  {'name':52s} {'chunks':>7s} {'samples':>11s} {'ts B/s':>7s} {'val B/s':>8s}  value encodings")
    kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for name, chunks, samples, ts_b, val_b, tags in rows:
        modes = Counter(_mode(int(t, 16)) for t in tags)
        print(
            f"  {name:52s} {chunks:>7,} {samples:>11,} {ts_b / samples:7.3f} {val_b / samples:8.3f}  "
            + ", ".join(f"{m} {c}" for m, c in modes.most_common())
        )
        k = kinds[kind_of(name)]
        for i, x in enumerate((chunks, samples, ts_b, val_b)):
            k[i] += int(x)
    print("\nby kind (ts / value blob bytes per sample of that kind; share of all samples' bytes):")
    for kind, (chunks, samples, ts_b, val_b) in sorted(kinds.items()):
        print(
            f"  {kind:24s} {chunks:>7,} chunks {samples:>11,} samples  ts {ts_b / samples:.3f}"
            f"  value {val_b / samples:.3f} B/sample  ({(ts_b + val_b) / n:.3f} B per W1 sample)"
        )
    blobs = sum(k[2] + k[3] for k in kinds.values())
    print(f"  all blobs: {blobs:,} B = {blobs / n:.3f} B/sample")


def _mode(tag: int) -> str:
    """The value encoding a chunk's first byte names (``duckdb_codec``: both formats)."""
    if tag in (0x7E, 255):
        return "xor" if tag == 0x7E else "v1 xor"
    if 0x40 <= tag < 0x5C:
        d, f = divmod(tag - 0x40, 4)
        return f"near{d}" + (f"/10^{f}" if f else "")
    if 0x10 <= tag <= 0x16:
        return f"dec{tag & 0x0F}"
    return f"v1 near{tag & 0x7F}" if tag & 0x80 else f"v1 dec{tag}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    ap.add_argument("--batch-minutes", type=float, default=60)
    ap.add_argument("--end-offset-minutes", type=float, default=0)
    ap.add_argument("--data-dir", type=Path, help="report on this data directory instead of building one")
    args = ap.parse_args(argv)
    if args.data_dir is not None:
        main_file = args.data_dir / STORE_FILE
    else:
        main_file = build(args.out / "disk", args.days, args.end_offset_minutes, args.batch_minutes)
    report(main_file)


if __name__ == "__main__":
    main()
