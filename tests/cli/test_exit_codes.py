"""Exit codes from real answers of the service (platform-facts §5: 3 for 401/403, 4 for 404, 5 for
another 4xx, 6 for a 5xx), the service's message on one stderr line, nothing on stdout. The service never
answers a 5xx on purpose, so the 5xx is a real HTTP server of this test answering 503 (and the mapping
function is checked for every class)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servemetrics.client.api import exit_code_for
from tests.cli.conftest import INVOKE, MANAGE, Served, invoke
from tests.processes import free_port

ENV = ["model", "environment", "metrics"]


def _run(served: Served, args: list[str], key: str = MANAGE) -> tuple[int, str]:
    code, out, err = invoke([*args, "--url", served.base, "--api-key", key])
    assert out == "" and err.count("\n") == 1, (out, err)
    return code, err


def test_401_for_a_wrong_key_is_3(served: Served) -> None:
    code, err = _run(served, ["model", "list"], key="sm-not-a-key")
    assert code == 3
    assert err.startswith("error: the service answered 401: ")


def test_403_for_an_invoke_key_is_3(served: Served) -> None:
    code, err = _run(served, [*ENV, "--model-id", "m1"], key=INVOKE)
    assert code == 3
    assert err.startswith("error: the service answered 403: ")


def test_404_for_an_unknown_model_is_4(served: Served) -> None:
    code, err = _run(served, [*ENV, "--model-id", "nope"])
    assert (code, err) == (
        4,
        "error: the service answered 404: no model 'nope'; list your models with GET /v1/models\n",
    )
    code, err = _run(served, ["loops", "deployment", "metrics", "--deployment-id", "nope"])
    assert code == 4 and "no trainer deployment 'nope'" in err


def test_an_unknown_model_name_is_4_and_an_ambiguous_one_5(served: Served) -> None:
    code, err = _run(served, [*ENV, "--model-name", "nope"])
    assert (code, err) == (4, "error: no model named 'nope'; `servemetrics model list` shows yours\n")
    code, err = _run(served, ["model", "environment", "list", "--model-name", "whisper"])
    assert (code, err) == (5, "error: 2 models are named 'whisper' (m2, m3); pass --model-id\n")


def test_400_for_an_unknown_metric_is_5(served: Served) -> None:
    code, err = _run(served, [*ENV, "--model-id", "m1", "--metric", "bogus"])
    assert code == 5
    assert err.startswith("error: the service answered 400: unknown metric name(s): bogus. Known names: ")


def test_400_for_an_unknown_environment_or_event_kind_is_5(served: Served) -> None:
    code, err = _run(served, ["events", "--model-id", "m1", "--kind", "EXPLODED"])
    assert code == 5
    assert err.startswith("error: the service answered 400: unknown event kinds EXPLODED; use any of ")


@pytest.fixture
def failing() -> Iterator[str]:
    """A real HTTP server answering every request 503 ``{"error": "overloaded, retry later"}``."""
    body = json.dumps({"error": "overloaded, retry later"}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_5xx_is_6(failing: str) -> None:
    code, out, err = invoke(["model", "list", "--url", failing, "--api-key", MANAGE])
    assert (code, out, err) == (6, "", "error: the service answered 503: overloaded, retry later\n")


def test_no_answer_is_1() -> None:
    base = f"http://127.0.0.1:{free_port()}"
    code, _, err = invoke(["model", "list", "--url", base, "--api-key", MANAGE])
    assert code == 1
    assert err.startswith(f"error: cannot reach {base}: ")


def test_the_status_to_exit_code_table() -> None:
    statuses = [400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503, 504, 302]
    assert [exit_code_for(s) for s in statuses] == [5, 3, 3, 4, 5, 5, 5, 5, 6, 6, 6, 6, 1]
