"""The layer installs a complete, hashed lock that agrees with constraints.txt (`make layer-lock`).

What these check without the network: the lock's pins and hashes, its closure (from the
dev environment's metadata, the same versions), and that the layer's build refuses anything
unhashed. tests/template/test_sam_build.py installs it for real, for the Lambda's platform.
"""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement

from tests.template.helpers import (
    CONSTRAINTS,
    LAYER_DIR,
    LAYER_INPUTS,
    LAYER_LOCK,
    normalized,
    requirement_pins,
)

# The Lambda's interpreter and platform (template.yaml: python3.12, arm64), for markers.
LAMBDA_MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "aarch64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
}


def test_layer_lock_pins_every_distribution_with_hashes_at_the_constrained_versions():
    # GIVEN the lock and the project's constraints
    lock = requirement_pins(LAYER_LOCK.read_text())
    constraints = requirement_pins(CONSTRAINTS.read_text())
    # THEN each distribution is pinned to the version the tests run with
    assert lock
    for name, pin in lock.items():
        assert name in constraints, f"{name} is in the layer's lock, not in constraints.txt"
        assert pin.version == constraints[name].version, (
            f"{name}: lock {pin.version}, constraints {constraints[name].version}: "
            "run `make layer-lock`"
        )
        # AND carries the sha256 of at least one file of that version (pip refuses others)
        assert pin.hashes, f"{name} has no hash"
        for digest in pin.hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), (name, digest)


def test_layer_lock_is_exactly_what_the_layers_requirements_need():
    # GIVEN what the layer names, and the lock compiled from it
    inputs = requirement_pins(LAYER_INPUTS.read_text())
    lock = requirement_pins(LAYER_LOCK.read_text())
    # THEN each named distribution is locked at its version
    for name, pin in inputs.items():
        assert name in lock and lock[name].version == pin.version, (name, "run make layer-lock")
    # AND the lock is their closure on the Lambda's platform, no more and no less: read from
    # the installed metadata, at the same versions (constraints.txt), so a dependency that
    # floated in unhashed, or a leftover, would show here
    needed: set[str] = set()
    todo = list(inputs)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        dist = metadata.distribution(name)
        assert normalized(dist.metadata["Name"]) == name
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            marker = requirement.marker
            if marker is None or marker.evaluate({**LAMBDA_MARKERS, "extra": ""}):
                todo.append(normalized(requirement.name))
    assert set(lock) == needed


def test_layer_build_installs_the_lock_and_requires_its_hashes():
    # GIVEN the layer's Makefile (what `sam build` runs), continuation lines joined
    makefile = (LAYER_DIR / "Makefile").read_text().replace("\\\n", " ")
    installs = [line for line in makefile.splitlines() if " -m pip install " in line]
    # THEN its one pip install reads the lock in hash-checking mode
    assert len(installs) == 1, installs
    [install] = installs
    assert "--require-hashes" in install.split()
    assert "--requirement requirements.txt" in " ".join(install.split())
    assert LAYER_LOCK.name == "requirements.txt"
