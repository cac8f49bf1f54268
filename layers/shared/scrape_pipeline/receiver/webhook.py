"""The webhook receiver's logic, Lambda-free: verify, record once, enqueue; errors become
statuses here and nowhere else (docs/architecture.md lists the answers)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum

from scrape_pipeline.aws_errors import AWSUnavailableError
from scrape_pipeline.clock import SYSTEM_CLOCK, Clock
from scrape_pipeline.config.resources import (
    LEDGER_TABLE_NAME,
    LEDGER_TTL_DAYS,
    MAX_REOPENS,
    QUEUE_URL,
)
from scrape_pipeline.config.settings import Setting, SettingsError, integer, number, read_declared
from scrape_pipeline.jobs import JobKey, Source
from scrape_pipeline.ledger.evidence import Policy, Why
from scrape_pipeline.ledger.intake import Intake
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.ledger.table import LedgerError
from scrape_pipeline.processor.message import JobMessage, JobSender
from scrape_pipeline.receiver.freshness import Freshness
from scrape_pipeline.receiver.payload import (
    FieldLocations,
    Notification,
    PayloadError,
    TestEvent,
    parse_delivery,
)
from scrape_pipeline.receiver.secret_store import SecretStore
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.signatures.secret import SecretBundleError
from scrape_pipeline.receiver.signatures.signing import (
    NoValidSecretError,
    SignatureError,
    SignatureMismatchError,
    decode_base64,
    verify,
)

# The largest body the platform hands us (``max_body_bytes`` says how).
LAMBDA_SYNC_PAYLOAD_BYTES = 6_291_456
PROXY_EVENT_OVERHEAD_BYTES = 32_768
PLATFORM_MAX_BODY_BYTES = (LAMBDA_SYNC_PAYLOAD_BYTES - PROXY_EVENT_OVERHEAD_BYTES) * 3 // 4


@dataclass(frozen=True)
class ReceiverSettings:
    """The receiver's declarations, and those of its parts."""

    table_name: str = LEDGER_TABLE_NAME.field()
    queue_url: str = QUEUE_URL.field()
    secret_id: str = Setting(
        "WEBHOOK_SECRET_ID",
        "",
        'the secret bundle, per subscription: `{"subscriptions": {"<webhook id>": '
        '[{"value", "expires_at"}]}}`, several valid at once; an old flat '
        '`{"secrets": [...]}` reads as shared by all and is migrated by the next rotation',
        required=True,
    ).field()
    signature: SignatureConfig = field(default_factory=SignatureConfig)
    fields: FieldLocations = field(default_factory=FieldLocations)
    freshness: Freshness = field(default_factory=Freshness)
    max_body_bytes: int = integer(
        "MAX_BODY_BYTES",
        PLATFORM_MAX_BODY_BYTES,
        "larger deliveries get 413 before any work; the default is the platform's own ceiling: "
        "the body travels base64 (4/3) in a Lambda event of at most 6,291,456 bytes, 32,768 "
        "kept for headers and context, so (6,291,456 - 32,768) x 3/4; API Gateway (REST) "
        "would take 10 MB",
    ).field()
    secret_cache_seconds: float = number(
        "SECRET_CACHE_SECONDS",
        60.0,
        "cached secrets; one forced refresh when none matches, so a rotation needs no restart "
        "(0: no caching)",
        minimum=0,
    ).field()
    secret_refresh_min_seconds: float = number(
        "SECRET_REFRESH_MIN_SECONDS",
        5.0,
        "at most one forced refresh this often per container, so forged requests cannot turn "
        "into one Secrets Manager call each (0: a refresh at every mismatch)",
        minimum=0,
    ).field()
    ttl_days: int = LEDGER_TTL_DAYS.field()
    resend_after_seconds: float = number(
        "RESEND_AFTER_SECONDS",
        120.0,
        "a duplicate finding a RECEIVED row this old re-enqueues it (its writer crashed)",
        minimum=0,
    ).field()
    max_reopens: int = MAX_REOPENS.field()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReceiverSettings:
        """Read and validate the settings; ``SettingsError`` names what is wrong."""
        env = os.environ if env is None else env
        values = read_declared(cls, env)
        signature = SignatureConfig.from_env(env)
        return cls(
            **values,
            signature=signature,
            fields=FieldLocations.from_env(env),
            freshness=Freshness.from_env(env, signature),
        )


@dataclass(frozen=True)
class Answer:
    """What to tell the sender, and what happened (the metric to count)."""

    status: int
    body: dict[str, str]
    outcome: WebhookOutcome
    job: JobKey | None = None
    reason: str | None = None


class WebhookOutcome(StrEnum):
    """What became of one delivery (its value is logged as ``outcome``)."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    RECOVERED = "recovered"
    REOPENED = "reopened"
    LATE = "late"
    SIGNATURE_REJECTED = "signature_rejected"
    BAD_REQUEST = "bad_request"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"
    TEST = "test"

    @property
    def metric(self) -> str:
        """The metric this outcome counts in (a body too large is a bad request)."""
        return _METRICS[self]


_METRICS: Mapping[WebhookOutcome, str] = {
    WebhookOutcome.ACCEPTED: "WebhookAccepted",
    WebhookOutcome.DUPLICATE: "WebhookDuplicate",
    WebhookOutcome.RECOVERED: "WebhookRecovered",
    WebhookOutcome.REOPENED: "JobsReopened",
    WebhookOutcome.LATE: "WebhookLate",
    WebhookOutcome.SIGNATURE_REJECTED: "SignatureRejected",
    WebhookOutcome.BAD_REQUEST: "WebhookBadRequest",
    WebhookOutcome.TOO_LARGE: "WebhookBadRequest",
    WebhookOutcome.UNAVAILABLE: "ReceiverUnavailable",
    WebhookOutcome.TEST: "WebhookTest",
}


# What the receiver answers, by why the delivery moved the row (or not: a duplicate).
_OUTCOMES: Mapping[Why, WebhookOutcome] = {
    Why.NEW: WebhookOutcome.ACCEPTED,
    Why.SETTLED_AFTER_ALL: WebhookOutcome.REOPENED,  # closed as unknown or never settled
    Why.ANNOUNCED: WebhookOutcome.ACCEPTED,  # the batch or crawl its submitter recorded
    Why.WOKEN: WebhookOutcome.RECOVERED,  # a long-running job parked WATCHING
    Why.STALE: WebhookOutcome.RECOVERED,  # an earlier delivery's writer died before its send
    Why.LATE_WEBHOOK: WebhookOutcome.LATE,  # recovered without it: counted once per job
}


# Headers that name one delivery, by sender (Geonode's guess, Standard Webhooks, GitHub).
_DELIVERY_ID_HEADERS = ("x-webhook-delivery-id", "webhook-id", "x-github-delivery")
MAX_CORRELATION_CHARS = 128


def correlation_id(headers: Mapping[str, str]) -> str | None:
    """The delivery's id from its headers, to correlate its log lines; None when it has none."""
    lowered = {k.lower(): v for k, v in headers.items()}
    found = next(filter(None, map(lowered.get, _DELIVERY_ID_HEADERS)), "")
    return found[:MAX_CORRELATION_CHARS] or None


def _answer(outcome: WebhookOutcome, key: JobKey) -> Answer:
    """200: accepted (this delivery moved the job on) or a duplicate, as ``outcome`` says."""
    status = (
        "duplicate" if outcome in (WebhookOutcome.DUPLICATE, WebhookOutcome.LATE) else "accepted"
    )
    return Answer(
        200, {"status": status, "kind": key.kind.value, "job_id": key.job_id}, outcome, key
    )


def unavailable_answer(reason: str, job: JobKey | None = None) -> Answer:
    """503: the sender must retry; nothing was recorded that a retry would not fix."""
    return Answer(
        503, {"error": "temporarily unavailable"}, WebhookOutcome.UNAVAILABLE, job, reason
    )


def bad_request(exc: PayloadError) -> Answer:
    """400: the delivery itself is unusable; its error says why, to the sender too."""
    return Answer(400, {"error": str(exc)}, WebhookOutcome.BAD_REQUEST, reason=str(exc))


def _refusal(exc: Exception) -> Answer:
    """A refusal before anything is written, by its kind (a stale delivery is a bad signature)."""
    if isinstance(exc, NoValidSecretError):  # our configuration: make the sender retry, alarm
        return unavailable_answer("no valid secret configured")
    if isinstance(exc, SignatureError):
        rejected = WebhookOutcome.SIGNATURE_REJECTED
        return Answer(401, {"error": "invalid signature"}, rejected, reason=exc.reason)
    if isinstance(exc, PayloadError):
        return bad_request(exc)
    # AWS failing or a malformed stored bundle: a retry after it is fixed succeeds.
    return unavailable_answer(f"secret unavailable: {type(exc).__name__}")


_REFUSED = (SignatureError, AWSUnavailableError, SecretBundleError, PayloadError)


def proxy_body(body: str | None, base64_encoded: bool | None) -> bytes:
    """The exact bytes of a proxy body, which the signature is over: never decoded as text."""
    text = body or ""
    if not base64_encoded:
        return text.encode()
    if (raw := decode_base64(text)) is None:
        raise PayloadError("body is not valid base64")
    return raw


def answer_proxy(
    body: str | None,
    *,
    base64_encoded: bool | None,
    headers: Mapping[str, str],
    receiver: Callable[[], Receiver],
) -> Answer:
    """One API Gateway delivery answered; ``receiver`` builds the container's receiver, once the
    body decoded (bad settings: 503)."""
    try:
        raw = proxy_body(body, base64_encoded)
        built = receiver()
    except PayloadError as exc:
        return bad_request(exc)
    except SettingsError as exc:
        return unavailable_answer(f"configuration: {exc}")
    return built.handle(raw, headers)


@dataclass
class Receiver:
    """Verify, record, enqueue."""

    settings: ReceiverSettings
    _: KW_ONLY
    ledger: Intake
    queue: JobSender
    secrets: SecretStore
    clock: Clock = SYSTEM_CLOCK

    def handle(self, body: bytes, headers: Mapping[str, str]) -> Answer:
        """Answer one delivery, given its exact bytes and headers."""
        if len(body) > self.settings.max_body_bytes:
            return Answer(
                413, {"error": "body too large"}, WebhookOutcome.TOO_LARGE, reason="body too large"
            )
        try:
            self._verify(body, headers)
            note = parse_delivery(body, self.settings.fields)
            # Verified bytes, but maybe captured long ago: the signed time says.
            self.settings.freshness.check(note.stamp, self.clock.time())
        except _REFUSED as exc:
            return _refusal(exc)
        if isinstance(note, TestEvent):
            # Only a secret's holder gets here; nothing is recorded for a job that does not exist.
            return Answer(200, {"status": "test", "event": note.event}, WebhookOutcome.TEST)
        key = JobKey(note.kind, note.job_id)
        try:
            return self._record_and_enqueue(key, note)
        except (AWSUnavailableError, LedgerError) as exc:
            return unavailable_answer(str(exc), key)

    def _verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        now = self.clock.time()
        config = self.settings.signature
        try:
            verify(config, headers, body, self.secrets.secrets(), now)
        except (SignatureMismatchError, NoValidSecretError):
            # Maybe the secret was rotated since we cached it: read it anew, once.
            fresh = self.secrets.refreshed()
            if fresh is None:
                raise
            verify(config, headers, body, fresh, now)

    def _record_and_enqueue(self, key: JobKey, note: Notification) -> Answer:
        # One call decides and writes; what it wrote is sent here, and undone if the send fails.
        taken = self.ledger.take_webhook(
            key,
            delivery_id=note.delivery_id,
            detail={"event": note.event},
            policy=Policy(resend_after_seconds=self.settings.resend_after_seconds),
        )
        if taken.written is not None:
            try:
                self.queue.send(JobMessage(key, Source.WEBHOOK))
            except AWSUnavailableError:
                # Undo the write so the sender's retry (this answer is a 503) makes it afresh; if
                # the undo fails too, the stale row is re-enqueued by a delivery or the reconciler.
                with contextlib.suppress(AWSUnavailableError):
                    self._undo(taken.before, taken.written)
                raise
        return _answer(_OUTCOMES.get(taken.why, WebhookOutcome.DUPLICATE), key)

    def _undo(self, before: LedgerRow | None, written: LedgerRow) -> None:
        if before is None:
            self.ledger.forget_unsent(written)
        else:
            self.ledger.unclaim(before, written)
