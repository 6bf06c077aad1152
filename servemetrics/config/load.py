"""Reading the config: ``load_config(path)`` (YAML file) and ``parse_config(data)`` (parsed YAML), and
the renderer that turns pydantic's errors into one line a human can act on."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from servemetrics.config.model import Config


class ConfigError(ValueError):
    """The config file is missing, not YAML, or has a bad key or value; the message says what to write."""


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate an already-parsed YAML document (None is an empty file); ``source`` starts the message.

    Raises ConfigError listing every problem, ``; ``-separated, each naming its key.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys such as listen, data_dir, models"
        )
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        lines = [_describe(e) for e in err.errors()]  # type: ignore[arg-type]
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None


def load_config(path: str | Path) -> Config:
    """Read and validate the YAML file at ``path``; raises ConfigError (one line: a syntax error or a
    ``!!python`` tag names the line and column; too deep a nesting is refused, not a RecursionError).

    A relative ``data_dir`` (also the default ``data``) or ``key_pepper_file`` is taken relative to the
    file's directory.
    """
    path = Path(path)
    text = _read(path)
    too_deep = (
        f"{path} nests lists or mappings too deeply to read; a config needs only a few levels: "
        "check the file's brackets and indentation"
    )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_error(path, err)) from None
    except RecursionError:
        raise ConfigError(too_deep) from None
    if isinstance(data, dict) and isinstance(data.get("data_dir", "data"), str):
        # a relative data_dir is relative to the config file, whatever the working directory
        data = {**data, "data_dir": str(path.parent / data.get("data_dir", "data"))}
    if isinstance(data, dict) and isinstance(data.get("key_pepper_file"), str):
        data = {**data, "key_pepper_file": str(path.parent / data["key_pepper_file"])}
    try:
        return parse_config(data, str(path))
    except RecursionError:
        raise ConfigError(too_deep) from None


def _read(path: Path) -> str:
    """The text of the file at ``path``; ConfigError when it cannot be read or is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(
            f"cannot read config file {path}: {err.strerror}; pass an existing YAML file"
        ) from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path} is not a UTF-8 text file (byte {err.start} cannot be decoded); pass a YAML file"
        ) from None


def _yaml_error(path: Path, err: yaml.YAMLError) -> str:
    """One line: the file, line and column (1-based) and the problem; a tag such as ``!!python/object``
    is named as not allowed."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"{path} line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
    problem = " ".join(str(getattr(err, "problem", None) or err).split())
    tag = re.search(r"constructor for the tag '([^']*)'", problem)
    if isinstance(err, yaml.constructor.ConstructorError) and tag:
        shown = tag.group(1).replace("tag:yaml.org,2002:", "!!")
        return (
            f"{where}: the tag {shown} is not allowed; a config holds plain mappings, lists, strings and "
            "numbers: remove the tag"
        )
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        at = f"line {context_mark.line + 1}, column {context_mark.column + 1}"
        problem += f" ({' '.join(str(context).split())} at {at})"
    elif context:
        problem += f" ({' '.join(str(context).split())})"
    return f"{where} is not valid YAML: {problem}; fix the file there"


def _describe(err: dict[str, Any]) -> str:
    """One pydantic error as a line naming the key (``models[0].id``) and what to write."""
    loc = tuple(err.get("loc", ()))
    if err["type"] == "extra_forbidden":
        allowed = list(_walk(loc[:-1])[0].model_fields)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return f"unknown key `{_where(loc)}`: {hint}allowed keys here are {', '.join(allowed)}"
    if err["type"] == "missing":
        return f"missing key `{_where(loc)}`: add it"
    if err["type"] == "model_type" and (model := _walk(loc)[1]) is not None:
        return f"`{_where(loc)}` must be a mapping {_mapping_hint(model)}"
    kinds = {"dict_type": "a mapping of names to values", "list_type": "a list", "string_type": "a string"}
    if err["type"] in kinds and loc:
        return f"`{_where(loc)}` must be {kinds[err['type']]}"
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"`{_where(loc)}`: {message}" if loc else message


def _where(loc: tuple[int | str, ...]) -> str:
    """An error location as written in the file's terms: ``models[0].deployments[1].id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _walk(loc: tuple[int | str, ...]) -> tuple[type[BaseModel], type[BaseModel] | None]:
    """Walk ``Config``'s fields along an error ``loc`` (list indices skipped).

    Returns the last model class met before a key that is no field (its keys are the ones allowed
    there), and the model class expected at ``loc`` itself (None when ``loc`` is not a model-typed key).
    """
    last: type[BaseModel] = Config
    at: type[BaseModel] | None = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = last.model_fields.get(str(part))
        if field is None:
            return last, None
        model = _model_of(field.annotation)
        at = model if at is not None else None
        last = model or last
    return last, at


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model class in a field's annotation (``X``, ``X | None``, ``list[X]``), or None."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _mapping_hint(model: type[BaseModel]) -> str:
    """``with username and password`` / ``of gpu_type, gpu_count, name``: the keys a mapping takes."""
    required = [name for name, f in model.model_fields.items() if f.is_required()]
    optional = [name for name, f in model.model_fields.items() if not f.is_required()]
    if not required:
        return f"with any of {', '.join(optional)}"
    more = f" (and optionally {', '.join(optional)})" if optional else ""
    return f"with {_and(required)}{more}"


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
