"""The YAML config file: ``load_config(path) -> Config`` and ``apply_config(config, registry)``.

Keys (defaults in brackets; docs/configuration.md has an example of each): ``listen`` [127.0.0.1:8321],
``data_dir`` [./data], ``scrape_interval`` [15s], ``scrape_timeout`` [10s, or the interval when shorter],
the scrape limits ``body_size_limit`` [64MiB], ``sample_limit`` [1000000], ``label_limit`` [64],
``label_name_length_limit`` [1024], ``label_value_length_limit`` [16384], ``custom_series_limit`` [1000],
``retention`` [15d], ``registry_url`` [sqlite:///<data_dir>/registry.sqlite3], ``store`` [kind: duckdb],
``organizations``, ``models``, ``loops`` (trainer deployments, docs/loops.md), ``network`` (where
tenant-supplied URLs may lead, docs/security.md), ``limits`` (request body sizes, samples per push request,
active series per organization), ``auth_rate_limit`` [failures: 30, window: 60s], ``api_rate_limit``
[per_second: 100, activate_per_minute: 20, retry_per_minute: 10], ``ingest`` [workers: 2, queue: 4,
retry_after: 5s], ``reads`` [workers: 2], ``server`` [header_timeout: 10s, keep_alive_timeout: 5s,
limit_concurrency: 2048], ``health`` [interval: 2s, timeout: 1s, failures: 2, recovery_backoff: 1s,
recovery_backoff_max: 60s], ``gateway`` [server_timing_metric: inference] and ``key_pepper_file`` (or
``$SERVEMETRICS_KEY_PEPPER``). Durations are seconds (``15``) or a number with a unit ``ms s m h d``
(``15s``, ``15d``) and are held as float seconds. Every mistake raises ``ConfigError`` naming the key and
what to write instead.

Modules: ``model`` (the pydantic models), ``validators`` (the value checks), ``load`` (YAML and the
error renderer), ``apply`` (into the registry, and the ``store`` key for the store).
"""

from servemetrics.config.apply import apply_config, egress_of, engine_options, key_pepper, open_registry
from servemetrics.config.load import ConfigError, load_config, parse_config
from servemetrics.config.model import Config
from servemetrics.config.validators import check_registry_url, parse_duration

__all__ = [
    "Config",
    "ConfigError",
    "apply_config",
    "egress_of",
    "check_registry_url",
    "engine_options",
    "key_pepper",
    "load_config",
    "open_registry",
    "parse_config",
    "parse_duration",
]
