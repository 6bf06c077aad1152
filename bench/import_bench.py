"""``servemetrics import`` of W1 end to end: one CLI call per replica file into a fresh data directory.

    python bench/import_bench.py [--days 1] [--work-dir DIR] [--repo PATH ...]

1. Generates W1 (``shared/bench/gen_w1.py``, ``--days`` ending at a fixed hour, kept in ``--work-dir`` and
   reused) and splits it into one file per replica (24: the lines of series with ``replica="dX-rY"``, each
   family's metadata kept; a deployment's ``baseten_replicas_active`` goes with its replica ``r0``), since
   ``servemetrics import`` stores a file as the samples of one replica.
2. For each ``--repo`` (default: this checkout; give ``/work/main`` too for a before/after in one run), in
   a fresh data directory with a config declaring m1 / d1-d3 / 8 replicas each, runs
   ``python -m servemetrics import FILE --model m1 --deployment dX --replica dX-rY --config CFG`` for every
   file in turn, with that repository first on ``PYTHONPATH``, and times each call's wall clock.
3. Times the same call on a file holding only ``# EOF`` (five times, the median): the fixed cost of one call
   (interpreter, imports, registry, store open and close).
4. Imports the files again, into another fresh data directory, in one process per repository
   (``importer.into_data_dir``, what the command calls: registry, store open, parse, append, close), so
   that the import's own rate is seen without the interpreter's start and module imports.
5. Prints per repository: samples stored (from each call's ``stored N samples``), total wall time and
   samples/s over it, the fixed cost, and the in-process rate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from core_bench import service_config  # noqa: E402

END_S = 1767225600  # a fixed hour, so a generated file is reused
STORED = re.compile(r"stored ([\d,]+) samples")
REPLICA = re.compile(rb'replica="(d\d-r\d)"')
DEPLOYMENT = re.compile(rb'deployment_id="(d\d)"')


def generate(shared: Path, out: Path, days: float) -> None:
    """W1 into ``out`` (skipped when it exists)."""
    if out.exists():
        return
    tmp = out.with_suffix(".partial")
    subprocess.run([sys.executable, "gen_w1.py", str(tmp), str(days), str(END_S)], cwd=shared, check=True)
    tmp.rename(out)


def split(w1: Path, out_dir: Path) -> list[Path]:
    """One OpenMetrics file per replica of ``w1`` in ``out_dir`` (reused when there); their paths."""
    names = [f"d{d}-r{r}" for d in range(1, 4) for r in range(8)]
    paths = [out_dir / f"{n}.om" for n in names]
    if all(p.exists() for p in paths):
        return paths
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {n.encode(): open(out_dir / f"{n}.om", "wb") for n in names}
    meta = b""
    written: set[bytes] = set()
    with open(w1, "rb") as src:
        for line in src:
            if line.startswith(b"# EOF"):
                continue
            if line.startswith(b"#"):
                meta, written = line, set()
                continue
            found = REPLICA.search(line)
            replica = found.group(1) if found else DEPLOYMENT.search(line).group(1) + b"-r0"  # type: ignore[union-attr]
            if replica not in written:
                files[replica].write(meta)
                written.add(replica)
            files[replica].write(line)
    for f in files.values():
        f.write(b"# EOF\n")
        f.close()
    return paths


CHILD_ENV: dict[str, str] = {}
"""Set for every child process (``--pyc-cache``: a bytecode cache under the work directory)."""


def child_env(repo: Path) -> dict[str, str]:
    """The environment of a child running ``repo``'s code."""
    env = {**os.environ, "PYTHONPATH": str(repo), **CHILD_ENV}
    if "PYTHONPYCACHEPREFIX" in CHILD_ENV:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def import_call(repo: Path, cfg: Path, path: Path, whole: bool = False) -> tuple[float, int]:
    """One ``servemetrics import`` of ``path`` with ``repo``'s code: (wall seconds, samples stored). A
    replica file names its replica on the command line; a ``whole`` W1 file is read with each series'
    own ``model_id`` / ``deployment_id`` / ``replica`` labels."""
    replica = path.stem
    env = child_env(repo)
    args = ["import", str(path)]
    if not whole:
        args += ["--model", "m1", "--deployment", replica[:2], "--replica", replica]
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "servemetrics", *args, "--config", str(cfg)],
        env=env,
        capture_output=True,
        text=True,
        cwd=repo,  # python -m puts the working directory first on sys.path
    )
    took = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"import of {path} failed: {done.stderr[-2000:]}")
    found = STORED.search(done.stderr)
    return took, int(found.group(1).replace(",", "")) if found else 0


IN_PROCESS = """
import json, sys, time
from pathlib import Path
from servemetrics import importer
from servemetrics.config import load_config
cfg = load_config(Path(sys.argv[1]))
out = []
for name in sys.argv[2:]:
    path = Path(name)
    t = time.perf_counter()
    n = importer.into_data_dir(cfg, path, ("m1", path.stem[:2], path.stem), lambda done, total: None)
    out.append((time.perf_counter() - t, n))
print(json.dumps(out))
"""


def in_process(repo: Path, cfg: Path, files: list[Path]) -> tuple[float, int]:
    """Every file through ``importer.into_data_dir`` in one process of ``repo``'s code: (seconds in those
    calls, samples stored)."""
    env = child_env(repo)
    args = [sys.executable, "-c", IN_PROCESS, str(cfg), *map(str, files)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, cwd=repo, check=True)
    calls = json.loads(done.stdout.strip().splitlines()[-1])
    return sum(c[0] for c in calls), sum(c[1] for c in calls)


def fresh_config(root: Path) -> Path:
    """A config over a new, empty data directory under ``root``."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cfg = root / "bench.yaml"
    cfg.write_text(yaml.safe_dump(service_config(root / "data", 8399, []), sort_keys=False))
    return cfg


def bench_repo(repo: Path, w1: Path, files: list[Path], work: Path) -> dict[str, float]:
    """Import every replica file with ``repo``'s code into a fresh data directory, then the whole ``w1``
    file in one call into another; the figures."""
    cfg = fresh_config(work / f"run-{repo.name}")
    walls, stored = [], 0
    for path in files:
        took, n = import_call(repo, cfg, path)
        walls.append(took)
        stored += n
    empty = work / "empty" / "d1-r0.om"
    empty.parent.mkdir(exist_ok=True)
    empty.write_text("# EOF\n")
    empty_cfg = fresh_config(work / f"run-{repo.name}-empty")
    fixed = statistics.median(import_call(repo, empty_cfg, empty)[0] for _ in range(5))
    total = sum(walls)
    spent, stored_in = in_process(repo, fresh_config(work / f"run-{repo.name}-in-process"), files)
    whole_s, whole_n = import_call(repo, fresh_config(work / f"run-{repo.name}-whole"), w1, whole=True)
    return {
        "whole_s": whole_s,
        "whole_samples": whole_n,
        "in_process_s": spent,
        "in_process_per_s": stored_in / spent,
        "samples": stored,
        "wall_s": total,
        "per_s": stored / total,
        "fixed_s": fixed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "bench")
    ap.add_argument(
        "--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "servemetrics-import-bench"
    )
    ap.add_argument("--repo", type=Path, action="append", default=None, help="a checkout to run (repeatable)")
    ap.add_argument(
        "--pyc-cache",
        action="store_true",
        help="children cache bytecode (under the work directory) despite PYTHONDONTWRITEBYTECODE",
    )
    args = ap.parse_args()
    if args.pyc_cache:
        CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(args.work_dir / "pycache")
    shared = args.shared if args.shared.exists() else Path("/work/shared/bench")
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    w1 = work / f"w1_{args.days:g}d.om"
    generate(shared.resolve(), w1, args.days)
    files = split(w1, work / f"replicas_{args.days:g}d")
    size = w1.stat().st_size
    print(f"W1 {args.days:g} d: {size:,} B, {len(files)} replica files; load average {os.getloadavg()}")
    print(f"bytecode cached: {args.pyc_cache or not os.environ.get('PYTHONDONTWRITEBYTECODE')}")
    for repo in args.repo or [REPO]:
        r = bench_repo(repo.resolve(), w1, files, work)
        print(
            f"{repo}: {r['samples']:,.0f} samples stored in {r['wall_s']:.1f} s = "
            f"{r['per_s']:,.0f} samples/s; "
            f"fixed cost of one call {r['fixed_s']:.2f} s; in one process: {r['in_process_s']:.1f} s = "
            f"{r['in_process_per_s']:,.0f} samples/s; the whole file in one call (labels from the "
            f"file): {r['whole_samples']:,.0f} samples in {r['whole_s']:.1f} s = "
            f"{r['whole_samples'] / r['whole_s']:,.0f} samples/s"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
