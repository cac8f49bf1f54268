"""Seeded randomness keyed by what it decides, so results do not depend on request order."""

from __future__ import annotations

import hashlib
import random
import uuid


def rng_for(*parts: object) -> random.Random:
    """A generator seeded by ``parts`` (e.g. seed, url, nth submission): same parts, same draws."""
    # repr() of str/int/float tuples is stable across runs, unlike hash() of a str.
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def uuid_from(rng: random.Random) -> str:
    """A version-4 UUID string drawn from ``rng``."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def stable_uuid(*parts: object) -> str:
    """A version-4 UUID string that is a pure function of ``parts``."""
    return uuid_from(rng_for(*parts))
