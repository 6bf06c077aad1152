"""The backfill's fast reader (``ingest.backfill_fast``) against the library path (``backfill._FAST_READER``
off: every unit parsed by ``prometheus_client``): the same batches (series, order, times, value bits,
created zeros) or the same error, on generated files, the exposition fixtures, a slice of W1 and random
files; and hand-made units the fast reader must leave to the library."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import numpy as np
import pytest

from servemetrics.ingest import backfill, backfill_units
from servemetrics.ingest.backfill_fast import FastRun, parse_run
from tests.ingest.fixtures import FIXTURES, REPO_ROOT
from tests.ingest.openmetrics_gen import T0, openmetrics_lines

TARGET = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
GEN_W1 = FIXTURES.parents[1] / "bench" / "gen_w1.py"  # the shared workload's generator, beside the fixtures


def outcome(text: str | bytes, fast: bool, monkeypatch: pytest.MonkeyPatch, **kwargs) -> object:
    """Every batch as plain lists (values as their bits), or the error's type and message."""
    data = text.encode() if isinstance(text, str) else text
    monkeypatch.setattr(backfill, "_FAST_READER", fast)
    try:
        return [
            (b.series, b.series_index.tolist(), b.ts_ms.tolist(), b.values.view(np.int64).tolist())
            for b in backfill.iter_backfill(io.BytesIO(data), TARGET, **kwargs)
        ]
    except (backfill.BackfillError, UnicodeDecodeError) as exc:
        return (type(exc).__name__, str(exc))
    finally:
        monkeypatch.setattr(backfill, "_FAST_READER", True)


def same(text: str | bytes, monkeypatch: pytest.MonkeyPatch, **kwargs) -> object:
    fast = outcome(text, True, monkeypatch, **kwargs)
    assert fast == outcome(text, False, monkeypatch, **kwargs)
    return fast


def runs(text: str) -> list[FastRun]:
    """The ``FastRun`` s the cutter makes of ``text``."""
    return [
        u
        for units in backfill._chunks(io.BytesIO(text.encode()), None, None)
        for u in units
        if isinstance(u, FastRun)
    ]


def stored(result: object) -> int:
    assert isinstance(result, list), result
    return sum(len(b[2]) for b in result)


def test_generated_files_read_fast_give_the_library_batches(monkeypatch) -> None:
    text = "".join(openmetrics_lines(300, gpus=3))
    found = runs(text)
    assert found and all(parse_run(r).certain.all() for r in found)  # the fast reader read all of it
    assert stored(same(text, monkeypatch)) == 300 * (3 + 3 + 9 + 2)


def test_small_reads_chunks_and_units_cut_alike(monkeypatch) -> None:
    monkeypatch.setattr(backfill, "_READ_BYTES", 3000)  # units span blocks
    monkeypatch.setattr(backfill, "_CHUNK_LINES", 300)
    monkeypatch.setattr(backfill_units, "MAX_UNIT_LINES", 70)
    text = "".join(openmetrics_lines(400, gpus=2))
    result = same(text, monkeypatch, batch_size=500)
    assert len(result) > 5


def test_worker_processes_give_the_same_batches(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(backfill, "_CHUNK_LINES", 500)
    monkeypatch.setattr(backfill, "_READ_BYTES", 16384)
    text = "".join(openmetrics_lines(200, gpus=2))
    assert outcome(text, True, monkeypatch, workers=2) == outcome(text, False, monkeypatch, workers=1)


def _as_backfill(prom: str, times: int) -> str:
    """A text-format fixture as ``times`` concatenated OpenMetrics scrapes with timestamps in seconds."""
    out = []
    for k in range(times):
        for line in prom.splitlines():
            if line and not line.startswith("#"):
                line = f"{line} {T0 + 15 * k}"
            out.append(line + "\n")
        out.append("# EOF\n")
    return "".join(out)


FIXTURE_OUTCOMES: dict[str, int | str] = {
    "cadvisor_testdata_sample": "line 6: invalid OpenMetrics: Invalid line",
    "dcgm_exporter_gpu_operator_t4_excerpt": 0,
    "dcgm_exporter_k8s_pod_sample": 33,
    "knative_autoscaler_issue_excerpt": 0,
    "kube_state_metrics_test_expectations": 15,
    "kubelet_cadvisor_cgroup_systemd_issue_excerpt": "line 3: invalid OpenMetrics: Invalid line",
    "kubelet_cadvisor_k3s_containerd_excerpt": "line 1: invalid OpenMetrics: Invalid line",
    "kubelet_cadvisor_k8s_pr109398_excerpt": "line 1: invalid OpenMetrics: Invalid line",
    "kubelet_cadvisor_rke2_excerpt": "line 1: invalid OpenMetrics: Invalid line",
    "kubelet_metrics_resource_test_expectations": "line 3: invalid OpenMetrics: Invalid line",
    "sglang_docs_production_metrics_sample": 417,
    "sglang_dp_ranks_issue_excerpt": 27,
    "sglang_engine_type_label_pr_excerpt": 48,
    "triton_trtllm_backend_readme_sample": 21,
    "vllm_v0_aibrix_runtime_docs_sample": "line 57: invalid OpenMetrics: +Inf bucket missing",
    "vllm_v1_0.10_engine_label_issue_excerpt": 9,
    "vllm_v1_docs_design_sample": "line 23: invalid OpenMetrics: +Inf bucket missing",
    "vllm_v1_dp_engine1_issue_excerpt": 39,
}
"""Per fixture as 3 scrapes: the samples stored (adapted: what no source adapter maps is dropped), or
the start of the library's refusal. Fixtures whose lines carry their own timestamps get a second one
appended ("Invalid line"); two vLLM samples are cut histograms ("+Inf bucket missing"). The library path's
outcome, pinned so that both paths failing alike, or both storing nothing, cannot pass unnoticed."""


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.prom")), ids=lambda p: p.stem)
def test_exposition_fixtures_give_the_same_outcome(path, monkeypatch) -> None:
    result = same(_as_backfill(path.read_text(), 3), monkeypatch)
    want = FIXTURE_OUTCOMES[path.stem]
    if isinstance(want, str):
        assert isinstance(result, tuple) and result[0] == "BackfillError", result
        assert result[1].startswith(want), result
    else:
        assert stored(result) == want


def test_the_fixtures_with_plain_lines_are_read_fast(monkeypatch) -> None:
    """Most fixture units are certain: the comparison above is not library against library."""
    certain = total = 0
    for path in sorted(FIXTURES.glob("*.prom")):
        for run in runs(_as_backfill(path.read_text(), 2)):
            read = parse_run(run)
            certain += int(read.certain.sum())
            total += read.certain.shape[0]
    assert total > 100 and certain > total // 2


@pytest.fixture(scope="module")
def w1_slice(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("w1") / "w1.om"
    subprocess.run(
        [sys.executable, str(GEN_W1), str(path), "0.01", "1767225600"], check=True, capture_output=True
    )
    return path.read_bytes()


def test_w1_slice_same_batches(w1_slice, monkeypatch) -> None:
    result = same(w1_slice, monkeypatch)
    assert stored(result) > 0
    found = runs(w1_slice.decode())
    assert sum(len(r.lines) for r in found) == w1_slice.count(b"\n") - 8  # all but TYPE lines and # EOF
    assert all(parse_run(r).certain.all() for r in found)


def test_w1_slice_cut_mid_histogram_same_error(w1_slice, monkeypatch) -> None:
    end = w1_slice.index(b"\n", w1_slice.index(b'le="0.05"}')) + 1
    result = same(w1_slice[:end] + b"# EOF\n", monkeypatch)
    assert result[0] == "BackfillError" and "+Inf bucket missing" in result[1]


MUST_FALL_BACK = {
    "negative counter": "# TYPE c counter\nc_total 1 100\nc_total -1 115\n",
    "equal times (a duplicate)": "# TYPE c counter\nc_total 1 100\nc_total 2 100\n",
    "time going back": "# TYPE g gauge\ng 1 100\ng 2 99\n",
    "series back after another (same labels, other order)": (
        '# TYPE g gauge\ng{a="1",b="2"} 1 100\ng{c="1"} 1 100\ng{b="2",a="1"} 1 115\n'
    ),
    "created sample": "# TYPE c counter\nc_total 1 100\nc_created 90 100\n",
    "missing +Inf": '# TYPE h histogram\nh_bucket{le="1"} 1 100\nh_sum 1 100\nh_count 1 100\n',
    "count differs from +Inf": (
        '# TYPE h histogram\nh_bucket{le="1"} 1 100\nh_bucket{le="+Inf"} 2 100\nh_sum 1 100\nh_count 3 100\n'
    ),
    "buckets out of order": (
        '# TYPE h histogram\nh_bucket{le="2"} 1 100\nh_bucket{le="1"} 1 100\nh_bucket{le="+Inf"} 2 100\n'
    ),
    "bucket values decreasing": ('# TYPE h histogram\nh_bucket{le="1"} 3 100\nh_bucket{le="+Inf"} 2 100\n'),
    "fractional bucket": '# TYPE h histogram\nh_bucket{le="1"} 0.5 100\nh_bucket{le="+Inf"} 1 100\n',
    "sum without count": '# TYPE h histogram\nh_bucket{le="+Inf"} 1 100\nh_sum 1 100\n',
    "negative bound with sum": (
        '# TYPE h histogram\nh_bucket{le="-1"} 0 100\nh_bucket{le="+Inf"} 1 100\nh_sum 1 100\nh_count 1 100\n'
    ),
    "bucket after sum": (
        '# TYPE h histogram\nh_bucket{le="1"} 1 100\nh_sum 1 100\nh_bucket{le="+Inf"} 1 100\nh_count 1 100\n'
    ),
    "a bucket twice": '# TYPE h histogram\nh_bucket{le="+Inf"} 1 100\nh_bucket{le="+Inf"} 1 100\n',
    "group split": (
        '# TYPE h histogram\nh_bucket{a="1",le="+Inf"} 1 100\nh_bucket{a="2",le="+Inf"} 1 100\n'
        'h_sum{a="1"} 1 100\nh_count{a="1"} 1 100\n'
    ),
    "sum with le": '# TYPE h histogram\nh_bucket{le="+Inf"} 1 100\nh_sum{le="1"} 1 100\nh_count 1 100\n',
    "timestamp out of range": "# TYPE g gauge\ng 1 99999999999\n",
    "value overflowing to inf": "# TYPE g gauge\ng 1e999 100\n",
    "a unit line": "# TYPE g_seconds gauge\n# UNIT g_seconds seconds\ng_seconds 1 100\n",
}


@pytest.mark.parametrize("text", MUST_FALL_BACK.values(), ids=MUST_FALL_BACK.keys())
def test_units_the_fast_reader_is_not_certain_of_go_to_the_library(text, monkeypatch) -> None:
    text += "# EOF\n"
    for run in runs(text):
        assert not parse_run(run).certain.any()
    same(text, monkeypatch)


NOT_PLAIN = {
    "escaped label value": 'g{a="x\\"y"} 1 100\n',
    "exemplar": '# TYPE c counter\nc_total 1 100 # {t="1"} 1 100\n',
    "NaN": "g NaN 100\n",
    "+Inf value": "g +Inf 100\n",
    "no timestamp": "g 1\n",
    "nanosecond timestamp": "g 1 100.0000001\n",
    "underscore": "g 1_0 100\n",
    "brace in a value": 'g{a="}"} 1 100\n',
    "reserved label name": 'g{__x="1"} 1 100\n',
    "repeated label": 'g{a="1",a="2"} 1 100\n',
    "trailing space": "g 1 100 \n",
    "tab": "g\t1 100\n",
    "non-ASCII": 'g{a="é"} 1 100\n',
    "carriage return": "g 1 100\r\n",
    "le not a number": 'g{le="x"} 1 100\n',
}


@pytest.mark.parametrize("text", NOT_PLAIN.values(), ids=NOT_PLAIN.keys())
def test_lines_that_are_not_plain_are_read_as_text(text, monkeypatch) -> None:
    text = "# TYPE g gauge\ng 0 50\n" + text + "# EOF\n" if not text.startswith("#") else text + "# EOF\n"
    assert all(len(r.lines) <= 1 for r in runs(text))  # only ``g 0 50`` (if any) is a plain unit
    same(text, monkeypatch)


def _random_value(rng: random.Random) -> str:
    if rng.random() < 0.997:
        return rng.choice(
            [
                str(rng.randint(0, 10 ** rng.randint(1, 20))),
                f"{rng.uniform(0, 1e6):.{rng.randint(0, 17)}f}",
                f"{rng.uniform(0, 10):.3e}",
                repr(rng.random() * 10 ** rng.randint(-300, 300)),
                "0",
                "-0",
                "1E5",
            ]
        )
    return rng.choice(["NaN", "+Inf", "-1", "-0.0", "1e999", "0x10", ".5"])


def _random_ts(rng: random.Random, t: int) -> str:
    return rng.choice([str(t)] * 300 + [f"{t}.{rng.randint(0, 999):03d}", f"{t}.5", f"{t}.12345", f"{t}000"])


def _random_file(rng: random.Random) -> str:
    out = []
    for f in range(rng.randint(1, 5)):
        kind = rng.choice(["gauge", "counter", "histogram", "unknown", "summary"])
        name = f"m{f}"
        if kind != "unknown":
            out.append(f"# TYPE {name} {kind}\n")
        series = [f'{{a="{i}",b="x y,z"}}' if i % 2 else f'{{a="{i}"}}' for i in range(rng.randint(1, 3))]
        points = rng.randint(1, 30)
        if kind == "histogram":
            for t in range(points):
                ts = _random_ts(rng, T0 + 15 * t)
                for s in series:
                    inner = s[1:-1]
                    c = 0
                    for le in ("0.5", "1", "+Inf"):
                        c += rng.choice([0, 1, 2])
                        out.append(f'{name}_bucket{{{inner},le="{le}"}} {c} {ts}\n')
                    out.append(f"{name}_sum{s} {rng.random() * 5:.3f} {ts}\n")
                    out.append(f"{name}_count{s} {c} {ts}\n")
        else:
            suffix = {"counter": "_total", "summary": "_sum"}.get(kind, "")
            for s in series:
                for t in range(points):
                    out.append(f"{name}{suffix}{s} {_random_value(rng)} {_random_ts(rng, T0 + 15 * t)}\n")
    out.append("# EOF\n")
    for _ in range(rng.choice([0, 0, 0, 1, 2])):  # a mutation: swap, repeat or drop a line
        i, j = rng.randrange(len(out) - 1), rng.randrange(len(out) - 1)
        op = rng.choice(["swap", "repeat", "drop"])
        if op == "swap":
            out[i], out[j] = out[j], out[i]
        elif op == "repeat":
            out.insert(i, out[i])
        else:
            del out[i]
    return "".join(out)


def test_random_files_same_outcome(monkeypatch) -> None:
    rng = random.Random(18)
    errors = certain = 0
    for _ in range(300):
        text = _random_file(rng)
        result = same(text, monkeypatch)
        errors += not isinstance(result, list)
        certain += sum(int(parse_run(r).certain.sum()) for r in runs(text))
    assert 20 < errors < 280 and certain > 500  # both outcomes, and many units read fast


def test_many_families_without_metadata_cut_alike(monkeypatch) -> None:
    """Families that start at a sample line (no ``# TYPE``), many per block and back at every scrape."""
    text = "".join(f'vllm:x{f}{{a="{f % 3}"}} {t} {T0 + 15 * t}\n' for t in range(40) for f in range(150))
    text += "".join(f"vllm:y{f} {t} {T0 + 15 * t}\n" for f in range(5) for t in range(200)) + "# EOF\n"
    found = runs(text)
    assert sum(len(r.starts) for r in found) == 40 * 150 + 5  # one unit per family stretch
    assert stored(same(text, monkeypatch)) == 40 * 150 + 5 * 200  # engine names are kept as they are


_ERROR_OF = """
import io, sys
from servemetrics.ingest import backfill
backfill._FAST_READER = sys.argv[1] == "fast"
try:
    list(backfill.iter_backfill(io.BytesIO(sys.stdin.buffer.read()), {"replica": "r1"}))
except backfill.BackfillError as exc:
    print(exc)
"""


def test_an_error_after_fast_units_names_the_library_paths_alias_ids() -> None:
    """The library's message quotes the shortened line (``f{a_="N"}``, N counting the label sets seen
    before in the process), which the error writes back as the file's line: right only when the fast
    reader registered the label sets it read, as the library path does; each path in a fresh process."""
    text = "".join(f'# TYPE g{k} gauge\ng{k}{{a="{k}"}} 1 100\n' for k in range(30))
    text += '# TYPE c counter\nc_total{a="x"} 1 100\nc_total{a="x"} -1 115\n# EOF\n'

    def error(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", _ERROR_OF, mode],
            input=text.encode(),
            capture_output=True,
            check=True,
            cwd=REPO_ROOT,
        )
        return done.stdout.decode().strip()

    fast = error("fast")
    assert fast == error("library")
    assert (
        fast == 'line 63: invalid OpenMetrics: Counter-like samples cannot be negative: c_total{a="x"} -1 115'
    )
