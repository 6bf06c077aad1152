"""pytest plugin: a throwaway PostgreSQL cluster for tests marked ``postgres``.

The session-scoped ``pg_url`` fixture runs the Debian binaries (``/usr/lib/postgresql/*/bin/initdb`` and
``pg_ctl``) on a data directory and unix socket in a temporary directory, on a free loopback port, and
stops the cluster at the end of the session. As root it runs them as the ``postgres`` user. Missing
binaries FAIL the test with the command to install them; they are never skipped silently.
Each call of ``fresh_pg_url(pg_url)`` makes an empty database so tests do not share state.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

INSTALL_HINT = "PostgreSQL binaries not found: run `apt-get update && apt-get install -y postgresql`"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.fail("running as root needs `runuser` (util-linux) to start PostgreSQL as `postgres`")
    return [runuser, "-u", "postgres", "--", *cmd]


def _run(cmd: list[str]) -> None:
    done = subprocess.run(_as_postgres(cmd), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}", pytrace=False
        )


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """``postgresql+psycopg://postgres@127.0.0.1:<port>/postgres`` of a cluster started for this session."""
    bindir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="sm-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()
    _run(
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"]
    )
    opts = f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c full_page_writes=off"
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", opts, "-w", "start"])
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def fresh_pg_url(pg_url: str) -> str:
    """Create an empty database on the session cluster and return its URL."""
    import sqlalchemy

    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return pg_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def pg_db_url(pg_url: str) -> str:
    """The URL of a new empty database on the session's PostgreSQL cluster."""
    return fresh_pg_url(pg_url)
