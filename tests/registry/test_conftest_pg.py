"""The PostgreSQL fixture fails loudly (never skips) when the Debian binaries are missing."""

from __future__ import annotations

import pytest

from tests import conftest_pg


def test_missing_binaries_fail_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest_pg.glob, "glob", lambda pattern: [])
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y postgresql"):
        conftest_pg._bin_dir()


@pytest.mark.postgres
def test_pg_url_serves_a_real_postgresql(pg_url: str) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(conftest_pg.fresh_pg_url(pg_url))
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("select version()")).scalar_one().startswith("PostgreSQL")
    engine.dispose()
