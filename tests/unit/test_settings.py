"""The one settings reader: defaults, minimums, and bad values named, in every settings class."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from scrape_pipeline.config.resources import QUEUE_URL, RESULTS_BUCKET, LedgerSettings
from scrape_pipeline.config.settings import (
    Kind,
    Setting,
    SettingsError,
    declared,
    integer,
    number,
    require,
)
from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.errors import ServerError
from scrape_pipeline.geonode.retry import NO_RETRY
from scrape_pipeline.geonode.settings import GeonodeSettings
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline.receiver.freshness import Freshness
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.webhook import PLATFORM_MAX_BODY_BYTES, ReceiverSettings
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps.watch import WatchSettings
from scrape_pipeline.wiring.processor import build_processor
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_ops.configuration import SOURCES, catalogue, markdown
from scrape_pipeline_ops.retry_settings import RetrySettings

RECEIVER_ENV = {"LEDGER_TABLE_NAME": "t", "QUEUE_URL": "q", "WEBHOOK_SECRET_ID": "s"}

# --- the reader ---------------------------------------------------------------------------


def read_float(env: Mapping[str, str], name: str, default: float, **limits: Any) -> float:
    return number(name, default, "", **limits).read(env)


def read_int(env: Mapping[str, str], name: str, default: int, **limits: Any) -> int:
    return integer(name, default, "", **limits).read(env)


def read_choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    return Setting(name, default, "", Kind.CHOICE, choices=choices).read(env)


@pytest.mark.parametrize("env", [{}, {"X": ""}, {"X": "   "}])
def test_read_unset_or_empty_is_the_default(env: dict[str, str]):
    # GIVEN a variable that is unset, empty (SAM's default for a parameter) or blank
    # WHEN each reader reads it THEN the default comes back
    assert read_float(env, "X", 2.5) == 2.5
    assert read_int(env, "X", 7) == 7
    assert Setting("X", "d", "").read(env) == "d"
    assert read_choice(env, "X", "a", ("a", "b")) == "a"
    assert Setting("X", ("p", "q"), "", Kind.LIST).read(env) == ("p", "q")


def test_read_values_are_parsed_and_stripped():
    env = {"F": " 0.25 ", "I": "12", "S": " name ", "C": "B", "L": " a.b , ,c "}
    assert read_float(env, "F", 1.0) == 0.25
    assert read_int(env, "I", 1) == 12
    assert Setting("S", "", "").read(env) == "name"
    assert read_choice(env, "C", "a", ("a", "b")) == "b"
    assert Setting[tuple[str, ...]]("L", (), "", Kind.LIST).read(env) == ("a.b", "c")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("ten", "must be a number"),
        ("nan", "must be a finite number"),
        ("inf", "must be a finite number"),
        ("0", "must be positive"),
        ("-1.5", "must be positive"),
    ],
)
def test_read_float_bad_value_names_variable_and_value(raw: str, problem: str):
    # WHEN a bad number is read THEN the one error names the variable and the value
    with pytest.raises(
        SettingsError, match=f"^LEASE_SECONDS {problem}, got '{re.escape(raw)}'$"
    ) as caught:
        read_float({"LEASE_SECONDS": raw}, "LEASE_SECONDS", 1.0)
    assert caught.value.names == ("LEASE_SECONDS",)
    assert caught.value.value == raw


def test_read_float_minimum_is_inclusive():
    assert read_float({"X": "0"}, "X", 1.0, minimum=0) == 0.0
    with pytest.raises(SettingsError, match=r"X must be at least 0, got '-0\.1'"):
        read_float({"X": "-0.1"}, "X", 1.0, minimum=0)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("2.5", "must be an integer"),  # never truncated to 2
        ("5.0", "must be an integer"),
        ("1e3", "must be an integer"),
        ("1_000", "must be an integer"),
        ("٣", "must be an integer"),  # a non-ASCII digit
        ("9" * 5000, "must be an integer"),  # more digits than int() takes
        ("0", "must be positive"),
        ("-3", "must be positive"),
    ],
)
def test_read_int_bad_value_names_variable(raw: str, problem: str):
    with pytest.raises(SettingsError, match=f"^MAX_ATTEMPTS {problem}, got ") as caught:
        read_int({"MAX_ATTEMPTS": raw}, "MAX_ATTEMPTS", 8)
    assert caught.value.value == raw


def test_read_int_bounds():
    assert read_int({"X": "0"}, "X", 1, minimum=0) == 0
    assert read_int({"X": "100"}, "X", 1, maximum=100) == 100
    with pytest.raises(SettingsError, match="X must be at most 100, got '101'"):
        read_int({"X": "101"}, "X", 1, maximum=100)
    with pytest.raises(SettingsError, match="X must be at least 2, got '1'"):
        read_int({"X": "1"}, "X", 5, minimum=2)


def test_read_choice_outside_choices_names_them():
    with pytest.raises(SettingsError, match=r"^MODE must be one of a, b, got 'c'$"):
        read_choice({"MODE": "c"}, "MODE", "a", ("a", "b"))


def test_require_names_every_missing_setting():
    # GIVEN two of three required settings missing (one empty)
    env = {"A": "1", "C": ""}
    # WHEN required THEN one error names both
    with pytest.raises(SettingsError, match=r"^missing settings: B, C$") as caught:
        require(env, "A", "B", "C")
    assert caught.value.names == ("B", "C")
    assert require({"A": "1", "B": " 2 "}, "A", "B") == ("1", "2")


def test_settings_error_is_a_value_error_in_the_pipeline_tree():
    assert issubclass(SettingsError, ValueError)
    assert issubclass(SettingsError, PipelineError)


# --- every settings class reads through it ------------------------------------------------


def test_settings_classes_defaults_unchanged():
    # GIVEN an environment with nothing but the required names THEN every default holds
    assert ProcessorSettings.from_env({}) == ProcessorSettings()
    assert ReconcilerSettings.from_env({}) == ReconcilerSettings()
    assert GeonodeSettings.from_env({}) == GeonodeSettings()
    receiver = ReceiverSettings.from_env(RECEIVER_ENV)
    assert receiver == ReceiverSettings("t", "q", "s")
    assert receiver.max_body_bytes == PLATFORM_MAX_BODY_BYTES


@pytest.mark.parametrize(
    "name",
    ["MAX_ATTEMPTS", "MAX_RESUBMISSIONS_PER_URL", "NOT_FOUND_MAX_TRIES", "MAX_RECEIVE_COUNT"],
)
def test_processor_integer_setting_given_a_fraction_is_an_error(name: str):
    # GIVEN an integer knob set to "2.5" WHEN read THEN an error names it (it was truncated to 2)
    with pytest.raises(SettingsError, match=f"^{name} must be an integer, got '2.5'$"):
        ProcessorSettings.from_env({name: "2.5"})


@pytest.mark.parametrize(
    ("cls", "env", "name"),
    [
        (ProcessorSettings, {"RETRY_BASE_SECONDS": "soon"}, "RETRY_BASE_SECONDS"),
        (ReconcilerSettings, {"RECONCILE_MAX_PAGES": "1.5"}, "RECONCILE_MAX_PAGES"),
        (ReconcilerSettings, {"RECONCILE_SHARE_WATCH": "0"}, "RECONCILE_SHARE_WATCH"),
        # Above the API's page maximum: an error, no longer clamped silently.
        (ReconcilerSettings, {"DELIVERY_PAGE_SIZE": "500"}, "DELIVERY_PAGE_SIZE"),
        (RetrySettings, {"GEONODE_RETRY_MAX_ATTEMPTS": "x"}, "GEONODE_RETRY_MAX_ATTEMPTS"),
    ],
)
def test_settings_classes_name_a_bad_value(cls: Any, env: dict[str, str], name: str):
    with pytest.raises(SettingsError, match=f"^{name} "):
        cls.from_env(env)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("MAX_BODY_BYTES", "1.5"),
        ("MAX_BODY_BYTES", "0"),
        ("LEDGER_TTL_DAYS", "ninety"),
        ("SECRET_CACHE_SECONDS", "-1"),
        ("SECRET_REFRESH_MIN_SECONDS", "nan"),
        ("RESEND_AFTER_SECONDS", "two minutes"),
        ("SIGNATURE_TOLERANCE_SECONDS", "1.5"),
    ],
)
def test_receiver_settings_validate(name: str, raw: str):
    # GIVEN the receiver's settings with one bad value WHEN read THEN it is named (not a bare
    # ValueError from float() or int(), and not accepted)
    with pytest.raises(SettingsError, match=f"^{name} .*got '{re.escape(raw)}'$"):
        ReceiverSettings.from_env({**RECEIVER_ENV, name: raw})


def test_receiver_settings_zero_cache_and_refresh_allowed():
    env = {**RECEIVER_ENV, "SECRET_CACHE_SECONDS": "0", "SECRET_REFRESH_MIN_SECONDS": "0"}
    settings = ReceiverSettings.from_env(env)
    assert (settings.secret_cache_seconds, settings.secret_refresh_min_seconds) == (0, 0)


def test_receiver_settings_missing_names_every_one():
    with pytest.raises(SettingsError, match=r"^missing settings: QUEUE_URL, WEBHOOK_SECRET_ID$"):
        ReceiverSettings.from_env({"LEDGER_TABLE_NAME": "t"})


def test_wiring_names_a_bad_ttl():
    env = {
        "LEDGER_TABLE_NAME": "t",
        "QUEUE_URL": "q",
        "RESULTS_BUCKET": "b",
        "GEONODE_SCRAPER_API_KEY": "k",
        "LEDGER_TTL_DAYS": "2.5",
    }
    with pytest.raises(SettingsError, match=r"^LEDGER_TTL_DAYS must be an integer"):
        build_processor(env, clock=ManualClock())


# --- declarations: every declared setting is read under its name by its class ---------------

CLASSES = [source for source in SOURCES if isinstance(source, type)]
DECLARED = [(cls, f, s) for cls in CLASSES for f, s in declared(cls).items()]
# A value other than the default, as written in the environment and as read.
GOOD: dict[Kind, tuple[str, Any]] = {
    Kind.TEXT: (" v ", "v"),
    Kind.URL: ("http://h.example/ ", "http://h.example"),
    Kind.LIST: (" a.b , ,c ", ("a.b", "c")),
    Kind.NUMBER: ("7.5", 7.5),
    Kind.INTEGER: ("7", 7),
}


def _good(setting: Setting[Any]) -> tuple[str, Any]:
    """``GOOD``'s value for the setting's kind; a choice's is its last, in upper case."""
    if setting.kind is Kind.CHOICE:
        return setting.choices[-1].upper(), setting.choices[-1]
    return GOOD[setting.kind]


def _read(cls: type, env: Mapping[str, str]) -> Any:
    """``cls`` read from ``env`` plus its required settings (the freshness window's signature
    is the default scheme's; the watch sweep's are the reconciler's)."""
    given = {s.name: "r" for s in declared(cls).values() if s.required} | dict(env)
    if cls is Freshness:
        return Freshness.from_env(given, SignatureConfig())
    if cls is WatchSettings:  # read as part of the reconciler's settings, never alone
        return ReconcilerSettings.from_env(given).watch
    return cls.from_env(given)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("cls", "field", "setting"), DECLARED, ids=lambda v: getattr(v, "name", v))
def test_declared_setting_is_read_under_its_name(cls: type, field: str, setting: Setting[Any]):
    # GIVEN the declared variable set to a value that is not its default
    raw, value = (" r ", "r") if setting.required else _good(setting)
    # WHEN its class reads the environment THEN the field holds it, parsed as declared
    assert getattr(_read(cls, {setting.name: raw}), field) == value
    assert value != setting.default


@pytest.mark.parametrize(
    ("cls", "field", "setting"),
    [d for d in DECLARED if d[2].kind in (Kind.NUMBER, Kind.INTEGER)],
    ids=lambda v: getattr(v, "name", v),
)
def test_declared_number_given_a_word_names_it(cls: type, field: str, setting: Setting[Any]):
    with pytest.raises(SettingsError, match=f"^{setting.name} must be an? .*, got 'soon'$") as e:
        _read(cls, {setting.name: "soon"})
    assert e.value.names == (setting.name,)


def test_declared_integer_off_word_means_no_limit():
    age = next(s for s in declared(Freshness).values() if s.off)
    assert age.read({age.name: " OFF "}) is None
    with pytest.raises(SettingsError, match=f"^{age.name} must be an integer, got 'of'$"):
        age.read({age.name: "of"})


def test_declared_choice_reads_lower_case_within_its_choices():
    mode: Setting[str | None] = Setting("MODE", None, "why", Kind.CHOICE, choices=("a", "b"))
    assert (mode.read({}), mode.read({"MODE": " B "})) == (None, "b")
    with pytest.raises(SettingsError, match=r"^MODE must be one of a, b, got 'c'$"):
        mode.read({"MODE": "c"})


def test_required_settings_missing_are_named_together():
    # GIVEN a class with required settings, none given WHEN read THEN one error names them all
    with pytest.raises(SettingsError, match=r"^missing settings: ") as caught:
        ReceiverSettings.from_env({})
    assert caught.value.names == ("LEDGER_TABLE_NAME", "QUEUE_URL", "WEBHOOK_SECRET_ID")


def test_resources_read_as_the_wiring_reads_them():
    # The calls wiring makes (LedgerSettings.from_env, QUEUE_URL.read, RESULTS_BUCKET.read)
    # keep its errors and defaults.
    assert LedgerSettings.from_env({"LEDGER_TABLE_NAME": " t "}) == LedgerSettings("t", 90, 3)
    assert LedgerSettings.from_env({"LEDGER_TABLE_NAME": "t", "MAX_REOPENS": "0"}).max_reopens == 0
    with pytest.raises(SettingsError, match=r"^LEDGER_TTL_DAYS must be an integer, got '2.5'$"):
        LedgerSettings.from_env({"LEDGER_TABLE_NAME": "t", "LEDGER_TTL_DAYS": "2.5"})
    for setting in (QUEUE_URL, RESULTS_BUCKET):
        assert setting.read({setting.name: " x "}) == "x"
        with pytest.raises(SettingsError, match=f"^missing settings: {setting.name}$"):
            setting.read({setting.name: ""})


def test_a_variable_declared_twice_is_refused():
    first, second = integer("X", 1, "one reason"), integer("X", 1, "another")
    assert catalogue(first, first) == [first]
    with pytest.raises(ValueError, match="X is declared twice"):
        catalogue(first, second)


def test_markdown_shows_defaults_as_written():
    rows = markdown(
        [
            Setting("A", "", "a | b", required=True),
            Setting("B", ("x", "y"), "", Kind.LIST),
            integer("C", 3, ""),
        ]
    ).splitlines()
    assert rows[2:] == ["| `A` | (required) | a &#124; b |", "| `B` | `x,y` |  |", "| `C` | 3 |  |"]


# --- GEONODE_RETRY_*: the CLI client's retries; a client without a policy has the defaults ---


def _always_503() -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"code": "X", "message": "m", "retryable": True})

    return httpx.MockTransport(answer), seen


_CLI_RETRY = RetrySettings.from_env({"GEONODE_RETRY_MAX_ATTEMPTS": "3"}).policy(connect_attempts=2)


@pytest.mark.parametrize(("policy", "requests"), [(_CLI_RETRY, 3), (None, 6), (NO_RETRY, 1)])
def test_geonode_retry_settings_make_the_cli_clients_policy(policy: Any, requests: int):
    # GIVEN GEONODE_RETRY_MAX_ATTEMPTS=3 read as the CLI reads it, and an API that answers 503
    transport, seen = _always_503()
    chosen = {} if policy is None else {"retry": policy}  # None: built without a policy
    client = GeonodeClient("k", transport=transport, clock=ManualClock(), **chosen)
    # WHEN a job is read THEN the setting decides the attempts; a client built without a policy
    # has RetryPolicy's defaults, and the Lambdas' wiring gives its own (NO_RETRY, ...)
    with pytest.raises(ServerError):
        client.get_job("j1")
    assert len(seen) == requests
