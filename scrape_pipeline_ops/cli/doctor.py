"""``doctor``: check a deployed (or local) stack end to end without creating any work.

    settings        the stack's outputs (or the variables ``local up`` prints) are all there
    api key         the stored key (what the Lambdas use) is accepted: GET /v1/webhooks
    <event type>    exactly one active subscription per event type, to the stack's URL, whose
                    latest delivery (if any) was not refused 401 (its secret not in the bundle)
    secret bundle   parses, no longer the stack's placeholder, and holds a valid secret for
                    each active subscription to the stack's URL (else its deliveries get 401),
                    none of them a secret the project publishes (samples.py) unless the
                    receiver is on this machine's loopback (the local stack)
    test delivery   a signed ``ping`` (payload.py) is answered 200 "test": the receiver
                    verified it and recorded nothing (no ledger row, no message)
    forged delivery the same ping with a wrong signature is answered 401

Every failed check prints one line saying what to do; exit 1 if any failed. A check that needs
what an earlier one could not provide is skipped, not failed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from scrape_pipeline.aws_errors import AWS_ERRORS, AWSError
from scrape_pipeline.geonode.api_key import SECRET_ID_ENV
from scrape_pipeline.geonode.errors import AuthError, GeonodeError
from scrape_pipeline.geonode.fields import format_time
from scrape_pipeline.geonode.webhooks import Delivery, Webhook
from scrape_pipeline.receiver.payload import EVENT_KINDS, TEST_EVENT
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.signatures.secret import SecretBundleError, WebhookSecret
from scrape_pipeline_ops.aws_translate import translate
from scrape_pipeline_ops.cli.config import FailedError, UsageError
from scrape_pipeline_ops.cli.webhooks import WEBHOOK_SECRET_ENV, WEBHOOK_URL_ENV
from scrape_pipeline_ops.samples import PUBLISHED_SECRETS, is_public_receiver
from scrape_pipeline_ops.signing import sign

if TYPE_CHECKING:
    import argparse

    from scrape_pipeline.geonode.client import GeonodeClient
    from scrape_pipeline_ops.cli.config import Context

COLUMNS = ("check", "status", "detail")
REQUIRED = (WEBHOOK_URL_ENV, WEBHOOK_SECRET_ENV, SECRET_ID_ENV)
DELIVERY_TIMEOUT_SECONDS = 15.0  # the contract's sender waits this long
DELIVERIES_LOOKED_AT = 20  # the newest page of a subscription's delivery log


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """``doctor``."""
    p = commands.add_parser(
        "doctor",
        parents=parents,
        help="check a stack end to end without creating work",
        description=(
            "Check the stack (--stack-name, or the variables 'local up' prints): its outputs, "
            "the stored API key against Geonode, one active subscription per event type to "
            "its URL, the secret bundle, and a signed test delivery (event 'ping') that the "
            "receiver must answer 200 without recording anything, and 401 when forged. "
            "Signs with this shell's SIGNATURE_* settings (default geonode). Prints what to "
            "do for each failed check; exit 1 if any failed."
        ),
    )
    p.set_defaults(handler=run)


@dataclass
class Check:
    """One check's verdict; ``hint`` is the one line saying what to do when it failed."""

    check: str
    status: str  # ok | FAIL | skipped
    detail: str
    hint: str | None = None


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def _fail(name: str, detail: str, hint: str) -> Check:
    return Check(name, "FAIL", detail, hint)


def _skipped(name: str, why: str) -> Check:
    return Check(name, "skipped", why)


class Doctor:
    """Runs the checks in order, each feeding the next what it found."""

    def __init__(self, ctx: Context, command: str) -> None:
        self.ctx = ctx
        self.command = command  # "scrape-pipeline [--stack-name S]", for the hints
        self.checks: list[Check] = []
        self.client: GeonodeClient | None = None
        self.hooks: list[Webhook] | None = None
        self.secret: WebhookSecret | None = None

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def run(self) -> list[Check]:
        try:
            return self._run()
        finally:
            if self.client is not None:
                self.client.close()

    def _run(self) -> list[Check]:
        env = self.ctx.environ
        missing = [name for name in REQUIRED if not env.get(name)]
        if missing:
            self.add(
                _fail(
                    "settings",
                    f"missing: {', '.join(missing)}",
                    "pass --stack-name NAME (a deployed stack), or export what "
                    "'scrape-pipeline local up' prints",
                )
            )
        else:
            self.add(_ok("settings", f"webhook URL {env[WEBHOOK_URL_ENV]}"))
        self._api_key(env.get(SECRET_ID_ENV))
        self._subscriptions(env.get(WEBHOOK_URL_ENV))
        self._bundle(env.get(WEBHOOK_SECRET_ENV), env.get(WEBHOOK_URL_ENV))
        self._deliveries(env.get(WEBHOOK_URL_ENV))
        return self.checks

    # -- Geonode ---------------------------------------------------------------------------

    def _api_key(self, secret_id: str | None) -> None:
        name = "api key"
        if not secret_id:
            self.add(_skipped(name, f"needs {SECRET_ID_ENV}"))
            return
        try:
            key = self.ctx.stored_api_key(secret_id)
        except (*AWS_ERRORS, AWSError) as exc:
            self.add(_fail(name, _aws(exc), "check the AWS credentials and region of this shell"))
            return
        except UsageError as exc:  # an empty secret
            self.add(_fail(name, str(exc), f"store the key: {self.command} secrets put-api-key"))
            return
        client = self.ctx.client(api_key=key)
        try:
            self.hooks = client.list_webhooks()
        except AuthError as exc:
            client.close()
            self.add(
                _fail(
                    name,
                    f"Geonode rejects the stored key (HTTP {exc.status_code})",
                    f"store the real key: {self.command} secrets put-api-key",
                )
            )
            return
        except GeonodeError as exc:
            client.close()
            self.add(
                _fail(
                    name,
                    str(exc),
                    "check --base-url (or GEONODE_BASE_URL) and this machine's network",
                )
            )
            return
        self.client = client
        self.add(_ok(name, f"accepted by {self.ctx.base_url}"))

    def _subscriptions(self, url: str | None) -> None:
        for event_type in sorted(EVENT_KINDS):
            if self.hooks is None or not url:
                self.add(_skipped(event_type, "needs the API key and the webhook URL"))
                continue
            mine = [h for h in self.hooks if h.event_type == event_type and h.url == url]
            active = [h for h in mine if h.is_active]
            if len(active) == 1:
                self.add(self._latest_delivery(event_type, active[0]))
            elif len(active) > 1:
                extra = " ".join(h.id for h in active[1:])
                self.add(
                    _fail(
                        event_type,
                        f"{len(active)} active subscriptions: each delivery comes twice",
                        f"delete the extra ones: {self.command} webhooks delete <ID> ({extra})",
                    )
                )
            elif mine:
                self.add(
                    _fail(
                        event_type,
                        f"subscription {mine[0].id} is disabled: no deliveries",
                        f"enable it: {self.command} webhooks enable {mine[0].id}",
                    )
                )
            else:
                self.add(
                    _fail(
                        event_type,
                        "no subscription to the stack's URL",
                        f"register it: {self.command} webhooks setup",
                    )
                )

    def _latest_delivery(self, name: str, hook: Webhook) -> Check:
        """A subscription whose latest delivery got 401 is signed with a secret we lack."""
        assert self.client is not None
        try:
            page = self.client.list_deliveries(hook.id, page_size=DELIVERIES_LOOKED_AT)
        except GeonodeError as exc:
            return _fail(name, f"its delivery log: {exc}", "run doctor again in a minute")
        answered = [d for d in page.items if d.http_status is not None]
        latest = max(answered, key=_when, default=None)
        if latest is not None and latest.http_status == 401:
            return _fail(
                name,
                f"subscription {hook.id}: its latest delivery was refused 401",
                f"rotate its secret into the bundle: {self.command} webhooks rotate-secret "
                f"{hook.id}",
            )
        seen = f", latest delivery HTTP {latest.http_status}" if latest is not None else ""
        return _ok(name, f"subscription {hook.id}{seen}")

    # -- the secret bundle -------------------------------------------------------------------

    def _bundle(self, secret_id: str | None, url: str | None) -> None:
        from scrape_pipeline_ops.rotation import SecretBundle  # noqa: PLC0415

        name = "secret bundle"
        if not secret_id:
            self.add(_skipped(name, f"needs {WEBHOOK_SECRET_ENV}"))
            return
        setup = f"{self.command} webhooks setup"
        try:
            contents = SecretBundle(secret_id, client=self.ctx.aws("secretsmanager")).contents()
        except AWSError as exc:
            self.add(_fail(name, str(exc), "check the AWS credentials and region of this shell"))
            return
        except SecretBundleError as exc:
            self.add(
                _fail(
                    name,
                    f"does not parse: {exc}",
                    'rewrite it as {"subscriptions": {"<webhook id>": '
                    '[{"value": ..., "expires_at": null}]}}',
                )
            )
            return
        if contents.placeholder:
            self.add(
                _fail(name, "still the stack's generated placeholder: verifies nothing", setup)
            )
            return
        now = self.ctx.clock.time()
        active = contents.active(now)
        if not active:
            self.add(
                _fail(name, "every secret in it has expired", f"{setup} (rotates them into it)")
            )
            return
        if is_public_receiver(url) and any(s.value in PUBLISHED_SECRETS for s in active):
            # events/webhook-valid.json verifies against it: anyone can forge deliveries.
            self.add(
                _fail(
                    name,
                    "holds the public sample secret of events/ as a valid secret: anyone can "
                    "forge deliveries to this receiver",
                    "put the stack's own bundle back (events/README.md says how): the sample "
                    "secret is for the local stack and sam local invoke only",
                )
            )
            return
        self.secret = active[0]
        # Each subscription signs with its own secret: one without a valid one is refused.
        if self.hooks is not None and url:
            ids = [h.id for h in self.hooks if h.url == url and h.is_active]
        else:
            ids = list(contents.secrets.subscriptions)
        lacking = contents.without_valid_secret(ids, now)
        if lacking:
            self.add(
                _fail(
                    name,
                    f"no valid secret for subscription(s) {' '.join(lacking)}: "
                    "their deliveries are refused 401",
                    f"{setup} (rotates their secrets into it)",
                )
            )
            return
        ending = [s.expires_at for s in active if s.expires_at is not None]
        until = f", the first expiring {format_time(min(ending))}" if ending else ""
        self.add(_ok(name, f"{len(active)} valid secret(s) for {len(ids)} subscription(s){until}"))

    # -- the receiver ------------------------------------------------------------------------

    def _deliveries(self, url: str | None) -> None:
        if not url or self.secret is None:
            for name in ("test delivery", "forged delivery"):
                self.add(_skipped(name, "needs the webhook URL and a valid secret"))
            return
        config = SignatureConfig.from_env(self.ctx.environ)
        delivery_id = f"doctor-{uuid.uuid4()}"
        body = json.dumps(
            {
                "event": TEST_EVENT,
                "webhook_id": None,
                "delivery_id": delivery_id,
                "timestamp": format_time(self.ctx.clock.time()),
                "data": {},
            }
        ).encode()
        post = _poster(url, delivery_id)
        now = self.ctx.clock.time()
        self.add(self._signed(post, body, sign(config, body, self.secret.value, now, delivery_id)))
        forged = sign(config, body, f"whsec_forged-{uuid.uuid4().hex}", now, delivery_id)
        self.add(self._forged(post, body, forged))

    def _signed(self, post: _Post, body: bytes, headers: dict[str, str]) -> Check:
        name = "test delivery"
        status, answer = post(body, headers)
        if status == 200 and answer.get("status") == "test":
            return _ok(name, "answered 200 test: verified, nothing recorded")
        if status is None:
            return _fail(name, str(answer.get("error")), "is the stack deployed? check its URL")
        detail = f"HTTP {status} {answer.get('error') or answer.get('status') or ''}".strip()
        if status == 401:
            hint = (
                "the receiver rejects the bundle's secret: make this shell's SIGNATURE_* "
                "match the stack's parameters"
            )
        elif status == 400 or (status == 200 and answer.get("status") != "test"):
            hint = "the receiver does not know test events: deploy this version (sam deploy)"
        elif status == 503:
            hint = "the receiver cannot work (settings, Secrets Manager): read its log"
        else:
            hint = "read the receiver's log for this delivery id"
        return _fail(name, detail, hint)

    def _forged(self, post: _Post, body: bytes, headers: dict[str, str]) -> Check:
        name = "forged delivery"
        status, answer = post(body, headers)
        if status == 401:
            return _ok(name, "answered 401")
        if status is None:
            return _fail(name, str(answer.get("error")), "is the stack deployed? check its URL")
        return _fail(
            name,
            f"HTTP {status}: a wrongly signed delivery was not refused",
            "the receiver does not verify signatures: check its SIGNATURE_* and its code",
        )


_Post = Callable[[bytes, dict[str, str]], tuple[int | None, dict[str, Any]]]


def _poster(url: str, delivery_id: str) -> _Post:
    """POST a delivery as Geonode would; returns (status, JSON answer) or (None, error)."""
    import httpx  # noqa: PLC0415

    def post(body: bytes, signature: dict[str, str]) -> tuple[int | None, dict[str, Any]]:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "scrape-pipeline-doctor",
            "X-Webhook-Event": TEST_EVENT,
            "X-Webhook-Delivery-Id": delivery_id,
            **signature,
        }
        try:
            response = httpx.post(
                url, content=body, headers=headers, timeout=DELIVERY_TIMEOUT_SECONDS
            )
        except httpx.HTTPError as exc:
            return None, {"error": f"cannot reach {url}: {type(exc).__name__}: {exc}"}
        try:
            answer = response.json()
        except ValueError:
            answer = {}
        return response.status_code, answer if isinstance(answer, dict) else {}

    return post


def _when(delivery: Delivery) -> float:
    moment = delivery.delivered_at or delivery.created_at
    return moment.timestamp() if moment is not None else 0.0


def _aws(exc: BaseException) -> str:
    if isinstance(exc, AWS_ERRORS):
        return str(translate(exc))
    return str(exc)


def report(ctx: Context, checks: Sequence[Check]) -> list[Check]:
    """Print the checks, then one line per failure saying what to do; returns the failures."""
    if ctx.out.json_mode:
        for check in checks:
            ctx.out.row(asdict(check), COLUMNS)
    else:
        rows = [{"check": c.check, "status": c.status, "detail": c.detail} for c in checks]
        ctx.out.table(rows, COLUMNS, title="doctor")
    failed = [c for c in checks if c.status == "FAIL"]
    for check in failed:
        ctx.out.note(f"to fix {check.check}: {check.hint}")
    return failed


def run(ctx: Context, args: argparse.Namespace) -> int:
    command = "scrape-pipeline" + (f" --stack-name {args.stack_name}" if args.stack_name else "")
    failed = report(ctx, Doctor(ctx, command).run())
    if failed:
        names = ", ".join(c.check for c in failed)
        raise FailedError(f"{len(failed)} check(s) failed: {names}")
    return 0
