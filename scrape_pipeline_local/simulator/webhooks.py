"""The events owed to webhook subscriptions, and their at-least-once delivery.

Timeline of one event (clock seconds; delays divided by ``webhook_time_scale``):

    settle_at ──▶ attempt 1 at +d0 ──fail──▶ attempt 2 at +d1 ... attempt n ──fail──▶ abandoned
                  (d = schedule[k] * jitter, + fault delay, + reorder hold)

Events are created lazily: ``expect()`` records when a job settles, and each dispatch turns
the settlements that are due into events for the subscriptions active at that moment.
"""

from __future__ import annotations

import heapq
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from scrape_pipeline_local.simulator.clocks import Clock
from scrape_pipeline_local.simulator.config import SimConfig
from scrape_pipeline_local.simulator.faults import Faults
from scrape_pipeline_local.simulator.seeding import rng_for, stable_uuid
from scrape_pipeline_local.simulator.signing import sign
from scrape_pipeline_local.simulator.subscriptions import (
    Attempt,
    Event,
    Subscription,
    SubscriptionStore,
)
from scrape_pipeline_local.simulator.timefmt import iso_seconds

USER_AGENT = "scraper-api-webhook/1.0"
log = logging.getLogger(__name__)


@dataclass(order=True, slots=True)
class _Due:
    due: float
    seq: int
    event: Event = field(compare=False)
    attempt_number: int = field(compare=False)
    duplicate: bool = field(compare=False, default=False)


@dataclass(order=True, slots=True)
class _Settlement:
    at: float
    seq: int
    event_type: str = field(compare=False)
    account: str = field(compare=False)
    job_id: str = field(compare=False)


Renderer = Callable[[str, str, str], dict[str, object]]  # (event_type, account, job_id) -> data


def build_request(
    config: SimConfig,
    *,
    sub: Subscription,
    event: Event,
    delivery_id: str,
    now: float,
    data: dict[str, object],
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one attempt, signed with the subscription's current secret.

    The envelope's ``timestamp`` is the attempt's time, or the event's (``webhook_timestamp``):
    a receiver's freshness window must let the last retry of either pass.
    """
    stamped = event.created_at if config.webhook_timestamp == "event" else now
    envelope: dict[str, object] = {
        "event": event.event_type,
        "webhook_id": sub.id,
        "delivery_id": delivery_id,
        "timestamp": iso_seconds(stamped),
        "data": data,
    }
    if config.webhook_flat_fields:
        envelope.update(job_id=event.job_id, event_type=event.event_type, id=delivery_id)
    body = json.dumps(envelope, separators=(",", ":")).encode()
    signature = sign(
        config.signature_scheme,
        sub.secret,
        body,
        message_id=event.id,  # stable across retries, as Standard Webhooks' webhook-id is
        timestamp=int(now),
        header=config.signature_header,
        prefix=config.signature_prefix,
    )
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Webhook-Event": event.event_type,
        "X-Webhook-Delivery-Id": delivery_id,
        **signature,
    }
    return body, headers


class WebhookDispatcher:
    """Turns settlements into events and sends due attempts on a small thread pool.

    ``lock`` is the simulator's state lock; ``render`` gives an event's ``data`` at send time.
    """

    def __init__(
        self,
        config: SimConfig,
        *,
        clock: Clock,
        faults: Faults,
        lock: threading.RLock,
        subscriptions: SubscriptionStore,
        render: Renderer,
    ) -> None:
        self._config = config
        self._subscriptions = subscriptions
        self._clock = clock
        self._faults = faults
        self._lock = lock
        self._idle = threading.Condition(lock)
        self._render = render
        self._pool = ThreadPoolExecutor(config.webhook_workers, thread_name_prefix="geonode-wh")
        self._client: httpx.Client | None = None  # built on first send: its TLS setup costs ~50 ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._in_flight = 0
        self.reset()

    # ----------------------------------------------------------------- state

    def reset(self) -> None:
        """Forget every event and attempt; sends in flight are ignored."""
        with self._lock:
            self._generation = getattr(self, "_generation", 0) + 1
            self._due: list[_Due] = []
            self._settlements: list[_Settlement] = []
            self._expected: dict[tuple[str, str], float] = {}
            self._events: list[Event] = []
            self._attempts: list[Attempt] = []
            self._seq = 0

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -------------------------------------------------------------- events

    def expect(self, event_type: str, account: str, job_id: str, at: float) -> None:
        """Record that ``job_id`` settles at ``at``; a later call replaces the time (cancel)."""
        with self._lock:
            self._expected[(event_type, job_id)] = at
            heapq.heappush(
                self._settlements, _Settlement(at, self._next_seq(), event_type, account, job_id)
            )

    def _emit_settled(self, now: float) -> None:
        while self._settlements and self._settlements[0].at <= now:
            item = heapq.heappop(self._settlements)
            if not self._live(item):
                continue  # superseded by a later expect() (a crawl cancelled mid-way)
            del self._expected[(item.event_type, item.job_id)]
            for sub in self._subscriptions.matching(item.account, item.event_type, item.at):
                self._new_event(sub, item)

    def _new_event(self, sub: Subscription, item: _Settlement) -> None:
        seed, faults = self._config.seed, self._faults.settings
        event_id = stable_uuid(seed, "event", item.event_type, item.job_id, sub.id)
        event = Event(event_id, item.event_type, item.account, item.job_id, sub.id, item.at)
        self._events.append(event)
        if rng_for(seed, "drop", event_id).random() < faults.drop_rate:
            event.dropped = True  # like a platform that lost it: never sent, never logged
            return
        first = item.at + self._delay(event, 1)
        heapq.heappush(self._due, _Due(first, self._next_seq(), event, 1))
        if rng_for(seed, "duplicate", event_id).random() < faults.duplicate_rate:
            event.duplicated = True
            heapq.heappush(self._due, _Due(first, self._next_seq(), event, 1, duplicate=True))

    def _delay(self, event: Event, attempt_number: int) -> float:
        """Clock seconds to wait before ``attempt_number``: scaled, jittered, plus faults."""
        config, faults = self._config, self._faults.settings
        rng = rng_for(config.seed, "attempt", event.id, attempt_number)
        base = config.webhook_retry_schedule_s[attempt_number - 1] / config.webhook_time_scale
        jitter = rng.uniform(1 - config.webhook_jitter, 1 + config.webhook_jitter)
        extra = rng.uniform(faults.delay_min_s, faults.delay_max_s) if faults.delay_max_s else 0.0
        hold = rng.uniform(0, faults.reorder_window_s) if faults.reorder_window_s else 0.0
        return base * jitter + extra + hold

    # ------------------------------------------------------------ dispatch

    def next_due(self) -> float | None:
        """Clock time of the next settlement or attempt (tests advance a ManualClock to it)."""
        with self._lock:
            # Drop superseded settlements from the top so the heap's head is a live one.
            while self._settlements and not self._live(self._settlements[0]):
                heapq.heappop(self._settlements)
            times = [self._due[0].due] if self._due else []
            times += [self._settlements[0].at] if self._settlements else []
            return min(times, default=None)

    def _live(self, item: _Settlement) -> bool:
        return self._expected.get((item.event_type, item.job_id)) == item.at

    def _dispatch(self) -> list[Future[None]]:
        """Send every attempt due now, in due order, on the pool; return their futures."""
        with self._lock:
            now = self._clock.time()
            self._emit_settled(now)
            taken = []
            while self._due and self._due[0].due <= now:
                taken.append(heapq.heappop(self._due))
            self._in_flight += len(taken)
            generation = self._generation
            orders = [self._next_seq() for _ in taken]
        return [
            self._pool.submit(self._send, item, order, generation)
            for item, order in zip(taken, orders, strict=True)
        ]

    def _send(self, item: _Due, order: int, generation: int) -> None:
        try:
            prepared = self._prepare(item, order, generation)
            if prepared is not None:
                attempt, body, headers, timeout = prepared
                try:
                    response = self._http().post(
                        attempt.url, content=body, headers=headers, timeout=timeout
                    )
                    self._finish(attempt, response.status_code, None, generation)
                except httpx.HTTPError as exc:
                    self._finish(attempt, None, type(exc).__name__, generation)
        except Exception:
            log.exception("webhook attempt for event %s failed inside the simulator", item.event.id)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._idle.notify_all()

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(trust_env=False, follow_redirects=False)
            return self._client

    def _prepare(
        self, item: _Due, order: int, generation: int
    ) -> tuple[Attempt, bytes, dict[str, str], float] | None:
        with self._lock:
            sub = self._subscriptions.find(item.event.subscription_id)
            if generation != self._generation or sub is None or not sub.is_active:
                return None  # deleted or disabled: no further attempts
            event, now = item.event, self._clock.time()
            delivery_id = stable_uuid(
                self._config.seed, "delivery", event.id, item.attempt_number, item.duplicate
            )
            data = self._render(event.event_type, event.account, event.job_id)
            body, headers = build_request(
                self._config, sub=sub, event=event, delivery_id=delivery_id, now=now, data=data
            )
            attempt = Attempt(
                delivery_id,
                event,
                item.attempt_number,
                item.duplicate,
                sub.url,
                now,
                order,
                body_bytes=len(body),
                secret_rotation=sub.rotations,
            )
            sub.log.append(attempt)
            self._attempts.append(attempt)
        timeout = max(
            self._config.webhook_timeout_s / self._config.webhook_time_scale,
            self._config.webhook_min_timeout_s,
        )
        return attempt, body, headers, timeout

    def _finish(
        self, attempt: Attempt, http_status: int | None, error: str | None, generation: int
    ) -> None:
        with self._lock:
            if generation != self._generation:
                return
            now = self._clock.time()
            attempt.http_status, attempt.error, attempt.delivered_at = http_status, error, now
            if http_status is not None and 200 <= http_status < 300:
                attempt.status = "success"
            elif attempt.duplicate:
                attempt.status = "failed"
            elif attempt.attempt_number < len(self._config.webhook_retry_schedule_s):
                attempt.status = "failed"
                following = attempt.attempt_number + 1
                due = now + self._delay(attempt.event, following)
                heapq.heappush(self._due, _Due(due, self._next_seq(), attempt.event, following))
            else:
                attempt.status = "abandoned"

    def pump(self, timeout: float = 30.0) -> int:
        """Send what is due now and wait for every attempt in flight; return how many this sent."""
        futures = self._dispatch()
        for future in futures:
            future.result(timeout=timeout)
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)
        return len(futures)

    def idle(self) -> bool:
        """Nothing due at the current clock time and nothing in flight."""
        with self._lock:
            now = self._clock.time()
            return self._in_flight == 0 and not (
                (self._due and self._due[0].due <= now)
                or (self._settlements and self._settlements[0].at <= now)
            )

    def drain(self, timeout: float = 10.0) -> bool:
        """Pump until idle (True) or until ``timeout`` real seconds have passed (False)."""
        deadline = time.monotonic() + timeout
        while True:
            self.pump(timeout=max(deadline - time.monotonic(), 0.01))
            if self.idle():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)

    # ---------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the background dispatcher thread (idempotent)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="geonode-wh-dispatch", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._config.webhook_poll_s):
            try:
                self._dispatch()
            except Exception:
                log.exception("webhook dispatcher pass failed")

    def close(self) -> None:
        """Stop the dispatcher, wait for sends in flight, close the HTTP client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._client is not None:
            self._client.close()

    # --------------------------------------------------------------- truth

    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)

    def attempts(self) -> list[Attempt]:
        with self._lock:
            return list(self._attempts)
