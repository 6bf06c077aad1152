"""The API key pepper outside the registry (issue 12 part 11): given by ``SERVEMETRICS_KEY_PEPPER`` or
``key_pepper_file``, an existing registry's own pepper moved out of it, and a pepper that does not fit
refused at start-up with one line saying what to do. Real `servemetrics serve` processes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from servemetrics.config import ConfigError, key_pepper, parse_config
from servemetrics.registry import Registry
from servemetrics.registry.pepper import KeyPepperError, check_of
from tests.conftest import REPO_ROOT
from tests.processes import free_port, stop, wait_http, write_service_config

KEY = "sm-acme-pepper-test-key-0001"
PEPPER = "b" * 64
OTHER = "c" * 64


def _secrets(tmp: Path) -> dict[str, str]:
    with sqlite3.connect(tmp / "data" / "registry.sqlite3") as db:
        return dict(db.execute("SELECT name, value FROM registry_secrets").fetchall())


def _env(pepper: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SERVEMETRICS_KEY_PEPPER"}
    return env if pepper is None else {**env, "SERVEMETRICS_KEY_PEPPER": pepper}


def _serve(tmp: Path, pepper: str | None) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "servemetrics", "serve", "--config", str(tmp / "servemetrics.yaml")]
    with open(tmp / "serve.log", "ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=_env(pepper))


def _key_works(tmp: Path, port: int, pepper: str | None) -> int:
    """Start the service, ask GET /v1/models with ``KEY``, stop it: the status."""
    proc = _serve(tmp, pepper)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        return httpx.get(
            f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {KEY}"}
        ).status_code
    finally:
        stop(proc)


def _refused(tmp: Path, pepper: str | None) -> tuple[int, str]:
    args = [sys.executable, "-m", "servemetrics", "serve", "--config", str(tmp / "servemetrics.yaml")]
    done = subprocess.run(
        args, capture_output=True, cwd=REPO_ROOT, env=_env(pepper), timeout=120, check=False
    )
    return done.returncode, done.stderr.decode()


def _config(tmp: Path, **more: object) -> int:
    port = free_port()
    orgs = [{"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]}]
    write_service_config(tmp, port, orgs, [], **more)
    return port


def test_an_existing_registrys_pepper_moves_out_and_a_wrong_one_is_refused(tmp_path):
    port = _config(tmp_path)
    assert _key_works(tmp_path, port, None) == 200
    own = _secrets(tmp_path)["key_pepper"]
    shown = f"sqlite:///{tmp_path / 'data' / 'registry.sqlite3'}"
    code, err = _refused(tmp_path, OTHER)
    assert (code, err.replace("\n", "")) == (
        2,
        f"error: {tmp_path / 'servemetrics.yaml'}: registry {shown}: the registry holds its own API key "
        "pepper and another one is given (SERVEMETRICS_KEY_PEPPER or key_pepper_file); to move the "
        "registry's pepper out give that one (SELECT value FROM registry_secrets WHERE name = "
        "'key_pepper'), or give none",
    )
    assert _secrets(tmp_path) == {"key_pepper": own}  # refused: nothing changed
    assert _key_works(tmp_path, port, own) == 200
    assert _secrets(tmp_path) == {"key_pepper_check": check_of(own)}  # the file alone no longer has it
    code, err = _refused(tmp_path, None)
    assert (code, err.replace("\n", "")) == (
        2,
        f"error: {tmp_path / 'servemetrics.yaml'}: registry {shown}: the registry's API key pepper was "
        "moved out of it; give it in SERVEMETRICS_KEY_PEPPER or in the file key_pepper_file names",
    )
    code, err = _refused(tmp_path, OTHER)
    assert (code, err.replace("\n", "")) == (
        2,
        f"error: {tmp_path / 'servemetrics.yaml'}: registry {shown}: the API key pepper given "
        "(SERVEMETRICS_KEY_PEPPER or key_pepper_file) is not the one this registry's keys were hashed "
        "with; give that one",
    )
    (tmp_path / "pepper").write_text(own + "\n")
    port = _config(tmp_path, key_pepper_file="pepper")  # relative to the config file
    assert _key_works(tmp_path, port, None) == 200


def test_a_new_registry_given_a_pepper_never_holds_one(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    registry = Registry.open(url, pepper=PEPPER)
    try:
        assert registry.tenancy._core.pepper == PEPPER
    finally:
        registry.close()
    with sqlite3.connect(tmp_path / "r.sqlite3") as db:
        assert db.execute("SELECT name, value FROM registry_secrets").fetchall() == [
            ("key_pepper_check", check_of(PEPPER))
        ]
    with pytest.raises(KeyPepperError, match="moved out"):
        Registry.open(url)


def test_a_short_or_doubly_given_pepper_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SERVEMETRICS_KEY_PEPPER", "short")
    with pytest.raises(ConfigError) as short:
        key_pepper(parse_config({}))
    assert str(short.value) == (
        "SERVEMETRICS_KEY_PEPPER holds a key pepper of 5 characters; give at least 32 random ones "
        "(e.g. the output of: openssl rand -hex 32)"
    )
    with pytest.raises(ConfigError) as both:
        key_pepper(parse_config({"key_pepper_file": str(tmp_path / "p")}))
    assert (
        str(both.value)
        == "SERVEMETRICS_KEY_PEPPER and key_pepper_file both give a key pepper; give one of them"
    )
