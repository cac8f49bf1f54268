"""The first day's commands against a real local stack: put-api-key, webhooks setup, doctor.

The module has its own stack; each test leaves it healthy (three subscriptions to the receiver,
their secrets in the bundle, the right key stored), as ``LocalStack.start`` made it.
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import string
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline.receiver.signatures.secret import WebhookSecret
from scrape_pipeline.receiver.signatures.signing import SignatureError, verify
from scrape_pipeline_local.stack import API_KEY, LocalStack
from scrape_pipeline_ops.rotation import PLACEHOLDER_LENGTH, is_placeholder
from scrape_pipeline_ops.samples import PUBLISHED_SECRETS, SAMPLE_FORGED_SECRET, SAMPLE_SECRET
from tests.cli.conftest import Cli, Result, assert_one_error_line
from tests.template.helpers import REPO

EVENT_TYPES = ("batch_completed", "crawl_completed", "extract_completed")


def _url(stack: LocalStack) -> str:
    assert stack.front is not None
    return stack.front.url("/webhooks/geonode")


def _secret(arn: str) -> str:
    return str(boto3.client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])


def _put(arn: str, value: str) -> None:
    boto3.client("secretsmanager").put_secret_value(SecretId=arn, SecretString=value)


def _placeholder() -> str:
    """A value shaped as CloudFormation generates it (template.yaml's WebhookSecret)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(PLACEHOLDER_LENGTH))


def _checks(result: Result) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in result.records()}


def _our_hooks(stack: LocalStack) -> list[Any]:
    return [h for h in stack.client().list_webhooks() if h.url == _url(stack)]


def _sim_secret(stack: LocalStack, webhook_id: str) -> str:
    """The simulator's own record of a subscription's secret."""
    found = stack.sim.subscriptions.find(webhook_id)
    assert found is not None and found.secret is not None
    return found.secret


def _work(stack: LocalStack) -> tuple[int, int]:
    """Ledger rows and queued messages: what a delivery would create."""
    assert stack.resources is not None
    rows = boto3.client("dynamodb").scan(TableName=stack.resources.table, Select="COUNT")
    queue = boto3.client("sqs").get_queue_attributes(
        QueueUrl=stack.resources.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(rows["Count"]), sum(int(v) for v in queue.values())


@pytest.fixture
def stack(live: LocalStack) -> Iterator[LocalStack]:
    """The live stack, made healthy again after the test: fresh subscriptions, the key."""
    assert live.resources is not None
    key = _secret(live.resources.api_key_secret_arn)
    yield live
    client = live.client()
    for hook in _our_hooks(live):
        client.delete_webhook(hook.id)
    live.subscribe()  # as at start: three subscriptions, their secrets as the bundle
    _put(live.resources.api_key_secret_arn, key)
    live.clock.advance(10)  # past the receiver's refresh limit: it reads the new secrets


# -- doctor -----------------------------------------------------------------------------------


def test_doctor_passes_on_a_healthy_stack_and_creates_no_work(stack: LocalStack, cli: Cli):
    # GIVEN the local stack as it starts: subscribed, secrets stored, key stored
    before = _work(stack)
    # WHEN doctor runs
    result = cli("doctor", "--json")
    # THEN every check passes, and the test delivery left no row and no message
    assert result.code == 0, result.err
    checks = _checks(result)
    assert {name: c["status"] for name, c in checks.items()} == {
        "settings": "ok",
        "api key": "ok",
        **dict.fromkeys(EVENT_TYPES, "ok"),
        "secret bundle": "ok",
        "test delivery": "ok",
        "forged delivery": "ok",
    }
    assert _work(stack) == before
    assert API_KEY not in result.out


def test_doctor_fails_a_disabled_subscription_with_what_to_do(stack: LocalStack, cli: Cli):
    # GIVEN the extract_completed subscription disabled
    [hook] = [h for h in _our_hooks(stack) if h.event_type == "extract_completed"]
    stack.client().update_webhook(hook.id, is_active=False)
    # WHEN doctor runs (as a person would: a table, then the hints)
    result = cli("doctor")
    # THEN that check fails, one line says what to do, and the exit status is 1
    assert_one_error_line(result, 1, "1 check(s) failed: extract_completed")
    hint = f"to fix extract_completed: enable it: scrape-pipeline webhooks enable {hook.id}"
    assert hint in result.out.splitlines()
    assert sum(line.startswith("to fix") for line in result.out.splitlines()) == 1


def test_doctor_fails_a_subscription_whose_deliveries_are_refused(stack: LocalStack, cli: Cli):
    # GIVEN extract_completed's secret rotated at the API only: the bundle lacks the new one
    [hook] = [h for h in _our_hooks(stack) if h.event_type == "extract_completed"]
    client = stack.client()
    client.rotate_webhook_secret(hook.id)
    client.submit_extract("https://example.com/cli/doctor-401")

    def refused() -> bool:
        return any(d.http_status == 401 for d in client.list_deliveries(hook.id).items)

    # WHEN its delivery has been refused, and doctor runs
    stack.run_until(refused, limit=600)
    result = cli("doctor", "--json")
    # THEN that event type fails with the remedy: rotate the secret into the bundle
    assert result.code == 1
    check = _checks(result)["extract_completed"]
    assert check["status"] == "FAIL" and "refused 401" in check["detail"]
    assert check["hint"] == (
        f"rotate its secret into the bundle: scrape-pipeline webhooks rotate-secret {hook.id}"
    )


def test_doctor_fails_a_bundle_where_one_subscription_has_no_valid_secret(
    stack: LocalStack, cli: Cli
):
    # GIVEN the bundle per subscription, but batch_completed's only secret expired
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    [hook] = [h for h in _our_hooks(stack) if h.event_type == "batch_completed"]
    document = json.loads(_secret(arn))
    document["subscriptions"][hook.id] = [
        {"value": _sim_secret(stack, hook.id), "expires_at": "2020-01-01T00:00:00+00:00"}
    ]
    _put(arn, json.dumps(document))
    # WHEN doctor runs
    result = cli("doctor", "--json")
    # THEN the bundle check fails naming that subscription, the others' secrets still valid
    assert result.code == 1
    checks = _checks(result)
    assert checks["secret bundle"]["status"] == "FAIL"
    assert checks["secret bundle"]["detail"] == (
        f"no valid secret for subscription(s) {hook.id}: their deliveries are refused 401"
    )
    assert checks["secret bundle"]["hint"] == (
        "scrape-pipeline webhooks setup (rotates their secrets into it)"
    )
    assert checks["test delivery"]["status"] == "ok"  # signed with another one's secret
    # AND the remedy it names rotates that subscription's secret alone into the bundle
    others = {i: g for i, g in document["subscriptions"].items() if i != hook.id}
    fixed = cli("webhooks", "setup", "--json")
    assert fixed.code == 0, fixed.err
    actions = {r["event_type"]: r["action"] for r in fixed.records()}
    assert actions == {
        "batch_completed": "kept, secret rotated into the bundle",
        "crawl_completed": "kept",
        "extract_completed": "kept",
    }
    after = json.loads(_secret(arn))["subscriptions"]
    assert after.pop(hook.id)[0] == {"value": _sim_secret(stack, hook.id), "expires_at": None}
    assert after == others
    stack.clock.advance(10)  # past the receiver's refresh limit: it reads the new secrets
    assert cli("doctor").code == 0


def test_doctor_fails_a_rejected_key_and_the_placeholder_bundle(stack: LocalStack, cli: Cli):
    # GIVEN a wrong key and the stack's placeholder in place of the webhook secrets
    assert stack.resources is not None
    _put(stack.resources.api_key_secret_arn, "not-the-key-1234")
    _put(stack.resources.webhook_secret_arn, _placeholder())
    # WHEN doctor runs
    result = cli("doctor", "--json")
    # THEN both fail with their remedy, and what needs them is skipped
    assert result.code == 1
    checks = _checks(result)
    assert checks["api key"]["status"] == "FAIL"
    assert checks["api key"]["hint"] == "store the real key: scrape-pipeline secrets put-api-key"
    assert checks["secret bundle"]["status"] == "FAIL"
    assert checks["secret bundle"]["hint"] == "scrape-pipeline webhooks setup"
    assert {checks[e]["status"] for e in EVENT_TYPES} == {"skipped"}
    assert checks["test delivery"]["status"] == "skipped"
    assert "not-the-key-1234" not in result.out + result.err


def _deployed_stack(stack: LocalStack, name: str) -> None:
    """A CloudFormation stack in moto whose outputs are the live stack's resources, behind a
    receiver URL as a deployment has one: not on this machine (``.invalid`` never resolves,
    so nothing is ever sent there)."""
    assert stack.resources is not None
    outputs = {
        "WebhookUrl": "https://receiver.invalid/Prod/webhooks/geonode",
        "LedgerTableName": stack.resources.table,
        "JobQueueUrl": stack.resources.queue_url,
        "WebhookSecretArn": stack.resources.webhook_secret_arn,
        "GeonodeApiKeySecretArn": stack.resources.api_key_secret_arn,
    }
    template = {
        "Resources": {"Marker": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": name}}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    boto3.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


@pytest.mark.parametrize(
    "published", [SAMPLE_SECRET, SAMPLE_FORGED_SECRET], ids=["sample", "forged-sample"]
)
def test_doctor_fails_a_deployed_stack_whose_bundle_holds_a_published_sample_secret(
    stack: LocalStack, cli: Cli, published: str
):
    # GIVEN a deployed stack's bundle as events/README.md once told operators to store it:
    # a published sample secret, valid, beside the subscriptions' own
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    document = json.loads(_secret(arn))
    document["secrets"] = [{"value": published, "expires_at": None}]
    _put(arn, json.dumps(document))
    _deployed_stack(stack, f"deployed-{len(published)}")
    # WHEN doctor checks that stack
    result = cli("--stack-name", f"deployed-{len(published)}", "doctor", "--json")
    # THEN the bundle fails: anyone holding events/webhook-valid.json can forge deliveries
    assert result.code == 1
    check = _checks(result)["secret bundle"]
    assert check["status"] == "FAIL"
    assert "public sample secret" in check["detail"]
    assert check["hint"].startswith("put the stack's own bundle back (events/README.md")
    # AND no delivery was signed with it or sent anywhere
    assert _checks(result)["test delivery"]["status"] == "skipped"
    assert published not in result.out + result.err


def test_doctor_passes_the_local_stack_holding_the_sample_secret(stack: LocalStack, cli: Cli):
    # GIVEN the local stack (its receiver on 127.0.0.1) with the sample secret in its bundle,
    # as the sample events need it there
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    document = json.loads(_secret(arn))
    document["secrets"] = [{"value": SAMPLE_SECRET, "expires_at": None}]
    _put(arn, json.dumps(document))
    stack.clock.advance(61)  # past the receiver's cache: it reads the bundle anew
    # WHEN doctor runs THEN every check passes: no one off this machine can reach the receiver
    result = cli("doctor", "--json")
    assert result.code == 0, result.out
    assert _checks(result)["secret bundle"]["status"] == "ok"


def test_published_secrets_cover_every_secret_in_events_and_the_docs():
    # GIVEN every whsec_ literal in events/ and the repository's docs, and the sample events
    docs = [*REPO.glob("*.md"), *(REPO / "events").glob("*.md")]
    shown = {m for p in docs for m in re.findall(r"whsec_[A-Za-z0-9_+/=-]+", p.read_text())}
    # THEN each is on the list doctor refuses on a deployed stack
    assert shown <= PUBLISHED_SECRETS, shown - PUBLISHED_SECRETS
    assert SAMPLE_SECRET in shown
    # AND every signed sample event verifies with one of them: none is signed with a secret
    # doctor does not know to be public
    for path in sorted((REPO / "events").glob("webhook-*.json")):
        event = json.loads(path.read_text())
        body = base64.b64decode(event["body"]) if event["isBase64Encoded"] else event["body"]
        published = [WebhookSecret(s) for s in sorted(PUBLISHED_SECRETS)]
        try:
            verify(SignatureConfig(), event["headers"], body, published, time.time())
        except SignatureError:
            pytest.fail(f"{path.name} is signed with a secret not in PUBLISHED_SECRETS")


# -- secrets put-api-key ----------------------------------------------------------------------


def test_put_api_key_from_stdin_checks_then_stores_it(
    stack: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN the key secret holding something else, and the key on stdin only
    assert stack.resources is not None
    arn = stack.resources.api_key_secret_arn
    _put(arn, "placeholder")
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")
    # WHEN it is stored
    result = cli("secrets", "put-api-key", "--json", stdin=f"{API_KEY}\n")
    # THEN Geonode accepted it, it is stored without its newline, and never printed
    assert result.code == 0, result.err
    assert result.record() == {"secret_id": arn, "stored": True, "checked": True}
    assert _secret(arn) == API_KEY
    assert API_KEY not in result.out + result.err


def test_put_api_key_prompts_without_echo_on_a_terminal(
    stack: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    # GIVEN no key variable and a terminal on stdin
    assert stack.resources is not None
    monkeypatch.delenv("GEONODE_SCRAPER_API_KEY")
    terminal = io.StringIO("typed keys would be echoed if read from here")
    monkeypatch.setattr(terminal, "isatty", lambda: True)
    monkeypatch.setattr("sys.stdin", terminal)
    prompts: list[str] = []

    def getpass(prompt: str) -> str:
        prompts.append(prompt)
        return API_KEY

    monkeypatch.setattr("getpass.getpass", getpass)
    # WHEN the key is stored THEN it was asked for without echo
    result = cli("secrets", "put-api-key", "--no-check", "--json")
    assert result.code == 0, result.err
    assert result.record()["checked"] is False
    assert prompts == ["Geonode API key (not echoed): "]
    assert _secret(stack.resources.api_key_secret_arn) == API_KEY


def test_put_api_key_refuses_a_key_geonode_rejects(
    stack: LocalStack, cli: Cli, monkeypatch: pytest.MonkeyPatch
):
    assert stack.resources is not None
    monkeypatch.setenv("GEONODE_SCRAPER_API_KEY", "wrong-key-5678")
    result = cli("secrets", "put-api-key")
    line = assert_one_error_line(result, 1, "Geonode rejects this key", "not stored")
    assert "wrong-key-5678" not in line
    assert _secret(stack.resources.api_key_secret_arn) == API_KEY


def test_put_api_key_never_from_the_command_line(stack: LocalStack, cli: Cli):
    result = cli("--api-key", "argv-key-1234", "secrets", "put-api-key")
    line = assert_one_error_line(result, 2, "never takes the key from the command line")
    assert "argv-key-1234" not in line


# -- webhooks setup ---------------------------------------------------------------------------


def test_setup_on_a_fresh_stack_registers_stores_and_drops_the_placeholder(
    stack: LocalStack, cli: Cli
):
    # GIVEN no subscription to the stack's URL and the stack's placeholder as the bundle
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    for hook in _our_hooks(stack):
        stack.client().delete_webhook(hook.id)
    _put(arn, _placeholder())
    # WHEN setup runs
    result = cli("webhooks", "setup", "--json")
    # THEN one subscription per event type is created, their three secrets are the bundle
    assert result.code == 0, result.err
    assert sorted((r["event_type"], r["action"]) for r in result.records()) == [
        (e, "created") for e in EVENT_TYPES
    ]
    hooks = _our_hooks(stack)
    assert sorted(h.event_type for h in hooks if h.is_active) == list(EVENT_TYPES)
    stored = json.loads(_secret(arn))["subscriptions"]
    assert stored == {
        h.id: [{"value": _sim_secret(stack, h.id), "expires_at": None}] for h in hooks
    }
    assert not is_placeholder(_secret(arn))
    # AND a second run changes nothing, and doctor is content
    bundle = _secret(arn)
    again = cli("webhooks", "setup", "--json")
    assert again.code == 0, again.err
    assert {r["action"] for r in again.records()} == {"kept"}
    assert _secret(arn) == bundle and len(_our_hooks(stack)) == 3
    stack.clock.advance(10)  # past the receiver's refresh limit: it reads the new secrets
    assert cli("doctor").code == 0


def test_setup_enables_a_disabled_one_and_rotates_secrets_the_bundle_lost(
    stack: LocalStack, cli: Cli
):
    # GIVEN subscriptions in place, one disabled, but the bundle back to the placeholder
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    [hook] = [h for h in _our_hooks(stack) if h.event_type == "batch_completed"]
    stack.client().update_webhook(hook.id, is_active=False)
    _put(arn, _placeholder())
    # WHEN setup runs
    result = cli("webhooks", "setup", "--json")
    # THEN nothing is created, the disabled one is enabled, every secret is rotated into it
    assert result.code == 0, result.err
    actions = {r["event_type"]: r["action"] for r in result.records()}
    assert actions["batch_completed"] == "enabled, secret rotated into the bundle"
    assert actions["extract_completed"] == "kept, secret rotated into the bundle"
    assert len(_our_hooks(stack)) == 3
    stored = json.loads(_secret(arn))["subscriptions"]
    assert {i: group[0]["value"] for i, group in stored.items()} == {
        h.id: _sim_secret(stack, h.id) for h in _our_hooks(stack)
    }
    stack.clock.advance(10)  # past the receiver's refresh limit: it reads the new secrets
    assert cli("doctor").code == 0


def test_register_stores_in_the_stack_secret_by_default(stack: LocalStack, cli: Cli):
    # GIVEN WEBHOOK_SECRET_ID set (as --stack-name sets it) and no --store-secret
    assert stack.resources is not None
    arn = stack.resources.webhook_secret_arn
    before = json.loads(_secret(arn))["subscriptions"]
    # WHEN a subscription is registered
    result = cli("webhooks", "register", _url(stack) + "?extra", "crawl_completed", "--json")
    # THEN its secret joined the stack's bundle
    assert result.code == 0, result.err
    hook = result.record()
    assert hook["secret_stored_in"] == arn
    after = json.loads(_secret(arn))["subscriptions"]
    assert after.pop(hook["id"]) == [{"value": _sim_secret(stack, hook["id"]), "expires_at": None}]
    assert after == before
    stack.client().delete_webhook(hook["id"])
