"""Where the API key pepper comes from: the registry itself (migration ``0002``), or outside it.

Key hashes are HMACs under the pepper (``registry.keys``). While the pepper sits in ``registry_secrets``
beside the hashes, a stolen registry file (or database dump) alone lets an attacker test guessed keys
offline. Given from outside (``SERVEMETRICS_KEY_PEPPER`` or ``key_pepper_file``, read by ``config``), the
registry keeps only ``key_pepper_check``, an HMAC of a fixed text under the pepper that tells a wrong
pepper from the right one at start-up (the pepper is 256 random bits: the check does not help guessing).

Moving the pepper out of an existing registry: give the registry's own pepper from outside once; the
registry's copy is then deleted. A registry that holds a pepper and is given another refuses to open
(its keys were hashed with its own); so does a registry whose pepper was moved out and is given none.
"""

from __future__ import annotations

import hashlib
import hmac

from sqlalchemy import Connection, Engine, delete, insert, select

from servemetrics.registry import tables as t
from servemetrics.registry.records import RegistryError

PEPPER = "key_pepper"
CHECK = "key_pepper_check"
READ_IT = "SELECT value FROM registry_secrets WHERE name = 'key_pepper'"
"""The SQL that reads a registry's own pepper (to move it out)."""


class KeyPepperError(RegistryError):
    """The pepper given from outside does not fit the registry, or none is given and the registry has
    none; ``str(err)`` says what to do."""


def check_of(pepper: str) -> str:
    """Hex HMAC-SHA256 of a fixed text under ``pepper``: the stored ``key_pepper_check``."""
    return hmac.new(pepper.encode(), b"servemetrics key pepper check", hashlib.sha256).hexdigest()


def _secret(conn: Connection, name: str) -> str | None:
    row = conn.execute(select(t.registry_secrets.c.value).where(t.registry_secrets.c.name == name))
    return row.scalar_one_or_none()


def _move_out(conn: Connection, given: str) -> None:
    conn.execute(delete(t.registry_secrets).where(t.registry_secrets.c.name.in_((PEPPER, CHECK))))
    conn.execute(insert(t.registry_secrets).values(name=CHECK, value=check_of(given)))


def key_pepper(engine: Engine, given: str | None, fresh: bool) -> str:
    """The pepper of the registry on ``engine``: its own (``given`` None) or ``given``, moving the
    registry's own copy out when ``given`` equals it or the registry was just created (``fresh``: its
    pepper was made by this open and hashes nothing yet).

    Raises:
        KeyPepperError: ``given`` differs from the registry's own pepper or from the one its check was
            made with; or none is given and the registry's pepper was moved out.
    """
    with engine.begin() as conn:
        stored, check = _secret(conn, PEPPER), _secret(conn, CHECK)
        if given is None:
            if stored is None:
                raise KeyPepperError(
                    "the registry's API key pepper was moved out of it; give it in SERVEMETRICS_KEY_PEPPER "
                    "or in the file key_pepper_file names"
                )
            return stored
        if stored is not None and stored != given and not fresh:
            raise KeyPepperError(
                "the registry holds its own API key pepper and another one is given (SERVEMETRICS_KEY_PEPPER "
                f"or key_pepper_file); to move the registry's pepper out give that one ({READ_IT}), "
                "or give none"
            )
        if stored is None and check is not None and check != check_of(given):
            raise KeyPepperError(
                "the API key pepper given (SERVEMETRICS_KEY_PEPPER or key_pepper_file) is not the one this "
                "registry's keys were hashed with; give that one"
            )
        if stored is not None or check is None:
            _move_out(conn, given)
        return given
