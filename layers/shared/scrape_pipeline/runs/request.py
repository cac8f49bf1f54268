"""What asks the submitter function for work: ``submissions/<run>.txt`` uploaded (with an
optional ``<run>.json`` of options, the CLI's shape), or ``{"continue": "<run>"}``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote_plus

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.runs.plan import (
    BATCH_MAX_URLS,
    FORMATS,
    BadPlanError,
    RunMode,
    RunSpec,
    check_name,
    is_url,
    post_options,
)

PREFIX: Final = "submissions/"
URLS_SUFFIX: Final = ".txt"
OPTIONS_SUFFIX: Final = ".json"
_OPTIONS: Final = frozenset({"mode", "formats", "render_js", "batch_size", "max_pages"})


class BadRequestError(PipelineError):
    """A run file or message the submitter cannot act on: logged and dropped, never retried."""


@dataclass(frozen=True)
class Start:
    """``submissions/<run>.txt`` was uploaded to ``bucket``."""

    bucket: str
    run: str


@dataclass(frozen=True)
class Continue:
    """The run is planned; ``idle`` counts the rounds in a row that changed nothing."""

    run: str
    idle: int = 0


type Request = Start | Continue


def urls_key(run: str) -> str:
    """The key of a run's URL list."""
    return f"{PREFIX}{run}{URLS_SUFFIX}"


def options_key(run: str) -> str:
    """The key of a run's options file."""
    return f"{PREFIX}{run}{OPTIONS_SUFFIX}"


def requests_of(body: str) -> list[Request]:
    """The requests one queue message holds (S3's test event holds none)."""
    message = _json_object(body)
    if "continue" in message:
        return [Continue(check_name(str(message["continue"])), int(message.get("idle", 0)))]
    if message.get("Event") == "s3:TestEvent":
        return []  # S3 checks the queue with it when the notification is configured
    records = message.get("Records")
    if not isinstance(records, list):
        raise BadRequestError(f"neither an S3 event nor a continuation: {body[:80]!r}")
    return [_start(record) for record in records]


def _json_object(text: str, what: str = "the message") -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise BadRequestError(f"{what} is not JSON: {text[:80]!r}") from exc
    if not isinstance(found, dict):
        raise BadRequestError(f"{what} is not a JSON object: {text[:80]!r}")
    return found


def _start(record: Mapping[str, Any]) -> Start:
    try:
        bucket = str(record["s3"]["bucket"]["name"])
        key = unquote_plus(str(record["s3"]["object"]["key"]))  # S3 sends keys URL-encoded
    except (KeyError, TypeError) as exc:
        raise BadRequestError("an S3 record without a bucket name and an object key") from exc
    return Start(bucket, run_name(key))


def run_name(key: str) -> str:
    """``<run>`` of ``submissions/<run>.txt``; BadRequestError for any other key."""
    if not (key.startswith(PREFIX) and key.endswith(URLS_SUFFIX)):
        raise BadRequestError(f"not a run file ({PREFIX}<run>{URLS_SUFFIX}): {key[:120]!r}")
    try:
        return check_name(key[len(PREFIX) : -len(URLS_SUFFIX)])
    except BadPlanError as exc:
        raise BadRequestError(str(exc)) from exc


def continuation(run: str, idle: int = 0) -> str:
    """The message that continues ``run``."""
    return json.dumps({"continue": run, "idle": idle})


def parse_urls(text: str) -> list[str]:
    """The URLs of a run file: one a line, blank lines and ``#`` comments skipped."""
    lines = (line.strip() for line in text.splitlines())
    urls = [line for line in lines if line and not line.startswith("#")]
    for url in urls:
        if not is_url(url):
            raise BadRequestError(f"not an http(s) URL: {url[:80]!r}")
    return urls


def spec_of(urls_text: str, options_text: str | None) -> RunSpec:
    """The run a URL list and its options file describe; BadRequestError when they do not."""
    text = (options_text or "").strip()
    raw = _json_object(text, "the options file") if text else {}
    unknown = sorted(set(raw) - _OPTIONS)
    if unknown:
        raise BadRequestError(f"unknown options {unknown}; known: {sorted(_OPTIONS)}")
    mode = _mode(raw)
    formats = _formats(raw)
    render_js = raw.get("render_js", False)
    if not isinstance(render_js, bool):
        raise BadRequestError("render_js is true or false")
    options = post_options(formats, render_js, _only_for(raw, "max_pages", mode, RunMode.CRAWL))
    batch_size = _only_for(raw, "batch_size", mode, RunMode.BATCH)
    try:
        return RunSpec.of(parse_urls(urls_text), mode, options, batch_size or BATCH_MAX_URLS)
    except BadPlanError as exc:
        raise BadRequestError(str(exc)) from exc


def _mode(raw: Mapping[str, Any]) -> RunMode:
    try:
        return RunMode(raw.get("mode", RunMode.ASYNC.value))
    except ValueError as exc:
        raise BadRequestError(f"mode is one of {[m.value for m in RunMode]}") from exc


def _formats(raw: Mapping[str, Any]) -> list[str]:
    formats = raw.get("formats", ["markdown"])
    if isinstance(formats, str):
        formats = [f.strip() for f in formats.split(",")]
    if not formats or not all(f in FORMATS for f in formats):
        raise BadRequestError(f"formats are some of {list(FORMATS)}; got {formats!r}")
    return list(formats)


def _only_for(raw: Mapping[str, Any], name: str, mode: RunMode, owner: RunMode) -> int | None:
    """The whole number ``name`` when given, which only a run of mode ``owner`` may give."""
    if name not in raw:
        return None
    if mode is not owner:
        raise BadRequestError(f"{name} applies to mode {owner.value}")
    value = raw[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequestError(f"{name} is a whole number of at least 1")
    return value
