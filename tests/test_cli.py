"""``servemetrics serve``: a config that cannot start the service is one error line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servemetrics import cli
from servemetrics.registry import Registry

HIST = """
data_dir: {data}
organizations: [{{name: acme, api_keys: [{{key: k1, type: WORKSPACE_MANAGE_ALL}}]}}]
models:
  - id: m1
    organization: acme
    deployments: [{{id: d1}}, {{id: d2}}, {{id: d3}}]
    environments:
      - name: production
        promotions:
          - {{deployment: d1, at: 2026-01-01T00:00:00Z}}
          - {{deployment: d2, at: 2026-02-01T00:00:00Z}}
"""


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Calls of ``uvicorn.run`` (the server is never started; nor is this process's heap frozen, which
    would keep every object alive now until the session ends)."""
    calls: list[dict] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))
    monkeypatch.setattr(cli, "freeze_startup_heap", lambda: None)
    # the configs here listen on the default 127.0.0.1:8321, which a demo on this machine may hold: the
    # port check has its own test (test_a_port_in_use_is_one_error_line)
    monkeypatch.setattr(cli, "_check_listen", lambda host, port: None)
    return calls


def _serve(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli.app, ["serve", "--config", str(path)])
    return result.exit_code, result.stderr


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "sm.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_binary_file_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    path = _write(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    code, stderr = _serve(path)
    assert (code, stderr) == (
        2,
        f"error: {path} is not a UTF-8 text file (byte 0 cannot be decoded); pass a YAML file\n",
    )
    assert served == []


def test_a_data_dir_that_is_a_file_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    path = _write(tmp_path, f"data_dir: {afile}\n")
    code, stderr = _serve(path)
    assert (code, stderr) == (
        2,
        f"error: {path}: data_dir {afile} exists and is not a directory; point data_dir at a directory\n",
    )
    assert served == []


def test_a_bad_registry_url_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\nregistry_url: not a url\n")
    code, stderr = _serve(path)
    assert (code, stderr) == (
        2,
        f"error: {path}: `registry_url`: 'not a url' is not a SQLAlchemy URL; write "
        "sqlite:///path/registry.sqlite3 or postgresql://user:pass@host:5432/db\n",
    )


def test_an_unreachable_postgres_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/x"
    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\nregistry_url: '{url}'\n")
    code, stderr = _serve(path)
    assert code == 2 and stderr.count("\n") == 1 and "Traceback" not in stderr
    assert stderr.startswith(f"error: {path}: cannot open the registry at {url} (")
    assert stderr.endswith(
        "check that PostgreSQL is running there and that the URL's host, port, user, "
        "password and database are right\n"
    )
    assert served == []


def test_a_config_the_registry_refuses_is_one_error_line_and_changes_nothing(
    tmp_path: Path, served: list[dict]
) -> None:
    data = tmp_path / "data"
    first = _write(tmp_path, HIST.format(data=data))
    assert _serve(first) == (0, "")
    assert len(served) == 1 and served[0]["port"] == 8321
    registry = Registry.open(f"sqlite:///{data / 'registry.sqlite3'}")
    before = registry.events.list_events("m1", 0, 2**53, None)
    registry.close()
    older = HIST.format(data=data) + "          - {deployment: d3, at: 2026-01-15T00:00:00Z}\n"
    older = older.replace("key: k1", "key: k2")
    code, stderr = _serve(_write(tmp_path, older))
    assert (code, stderr) == (
        2,
        f"error: {first}: models[m1].environments[production]: the promotion of 'd3' at 1768435200000 ms "
        "is older than the latest recorded change (1769904000000 ms); promotions can only be appended to "
        "the history\n",
    )
    assert len(served) == 1
    registry = Registry.open(f"sqlite:///{data / 'registry.sqlite3'}")
    assert registry.events.list_events("m1", 0, 2**53, None) == before
    assert registry.tenancy.authenticate("k1") is not None and registry.tenancy.authenticate("k2") is None
    registry.close()


def _rules(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli.app, ["rules", "--config", str(path)])
    return result.exit_code, result.stderr


def test_deeply_nested_yaml_is_one_error_line_for_rules_and_serve(tmp_path: Path, served: list[dict]) -> None:
    path = _write(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")
    expected = (
        2,
        f"error: {path} nests lists or mappings too deeply to read; a config needs only a few levels: check "
        "the file's brackets and indentation\n",
    )
    assert _rules(path) == expected
    assert _serve(path) == expected
    assert served == []


def test_yaml_syntax_and_python_tags_are_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    path = _write(tmp_path, "listen: [unclosed\n")
    assert _serve(path) == (
        2,
        f"error: {path} line 2, column 1 is not valid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 1, column 9); fix the file there\n",
    )
    path = _write(tmp_path, "listen: !!python/object/apply:os.system [id]\n")
    assert _rules(path) == (
        2,
        f"error: {path} line 1, column 9: the tag !!python/object/apply:os.system is not allowed; a config "
        "holds plain mappings, lists, strings and numbers: remove the tag\n",
    )
    assert served == []


ENGINE_STORE = (
    "store: {{kind: prometheus, flavor: victoriametrics, query_url: 'http://127.0.0.1:8428', "
    "remote_write_url: 'http://127.0.0.1:8428/api/v1/write', buffer_dir: '{buffer}'}}\n"
)


def test_a_buffer_dir_that_is_a_file_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\n" + ENGINE_STORE.format(buffer=afile))
    assert _serve(path) == (
        2,
        f"error: {path}: store.buffer_dir {afile} exists and is not a directory; point store.buffer_dir at "
        "a directory\n",
    )
    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\n" + ENGINE_STORE.format(buffer=""))
    assert _serve(path) == (
        2,
        f"error: {path}: `store.buffer_dir`: must not be empty; omit it (the default is remote_write_buffer "
        "in data_dir) or name a directory\n",
    )
    assert served == []


def test_unbounded_durations_are_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    path = _write(tmp_path, "scrape_interval: 10000000000000d\n")
    assert _rules(path) == (
        2,
        f"error: {path}: `scrape_interval`: must be at most 1h (got 8.64e+17s)\n",
    )
    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\nretention: 10000000000000d\n")
    assert _serve(path) == (
        2,
        f"error: {path}: `retention`: must be at most 3650d (10 years) (got 8.64e+17s)\n",
    )
    assert served == []


def test_one_url_twice_in_a_trainer_node_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    path = _write(
        tmp_path,
        f"data_dir: {tmp_path / 'data'}\norganizations: [{{name: acme}}]\nloops:\n"
        "  - id: t1\n    organization: acme\n    nodes:\n"
        "      - id: n0\n        role: leader\n        targets:\n"
        "          - {url: 'http://127.0.0.1:9/m', kind: dcgm}\n"
        "          - {url: 'http://127.0.0.1:9/m', kind: requests}\n",
    )
    expected = (
        2,
        f"error: {path}: `loops[0].nodes[0].targets`: target http://127.0.0.1:9/m is listed 2 times (kinds "
        "dcgm, requests); list each URL once, with the one kind it serves\n",
    )
    assert _serve(path) == expected
    assert _rules(path) == expected
    assert served == []


def test_a_data_dir_in_use_is_one_error_line(tmp_path: Path, served: list[dict]) -> None:
    """A second ``serve`` on a ``data_dir`` a running one holds (its lock file, PID inside): one line,
    exit 2, the server never started; once the first is gone, the same config starts."""
    import fcntl
    import os

    path = _write(tmp_path, f"data_dir: {tmp_path / 'data'}\n")
    assert _serve(path) == (0, "")  # creates data_dir; the lock is released when serve returns
    held = os.open(tmp_path / "data" / cli.DATA_DIR_LOCK, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.ftruncate(held, 0)
    os.write(held, b"4242\n")
    try:
        assert _serve(path) == (
            2,
            f"error: data_dir {tmp_path / 'data'} is in use by another `servemetrics serve` (PID 4242): "
            "stop it, or give this service another data_dir\n",
        )
        assert len(served) == 1
    finally:
        os.close(held)
    assert _serve(path) == (0, "") and len(served) == 2


def test_a_port_in_use_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``listen`` on a port another process holds: one line naming it and what to do, exit 2, before the
    server starts (uvicorn's own error was a line, then 40 lines of DuckDB leak warnings and exit 3)."""
    import socket

    calls: list[dict] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        path = _write(tmp_path, f"listen: 127.0.0.1:{port}\ndata_dir: {tmp_path / 'data'}\n")
        assert _serve(path) == (
            2,
            f"error: cannot listen on 127.0.0.1:{port} (Address already in use): stop what uses it, or set "
            "`listen` in the config to a free address (for example 127.0.0.1:8322)\n",
        )
        result = CliRunner().invoke(cli.app, ["demo", "--port", str(port)])
        assert result.exit_code == 2 and result.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}")
    assert calls == []
    assert _serve(path) == (0, "") and len(calls) == 1  # the port free again: it starts
