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
    """Calls of ``uvicorn.run`` (the server is never started)."""
    calls: list[dict] = []
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append(kw))
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
    before = registry.list_events("m1", 0, 2**53, None)
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
    assert registry.list_events("m1", 0, 2**53, None) == before
    assert registry.authenticate("k1") is not None and registry.authenticate("k2") is None
    registry.close()
