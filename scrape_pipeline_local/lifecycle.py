"""The start/stop shape every local service shares, so each is usable in a ``with`` block."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

# How often a socketserver's serving loop looks for ``shutdown``: the time a stop waits, at
# most. The standard library's 0.5 s cost each stack stopped about half a second (two such
# servers, a quarter second each on average); an idle loop's wake-ups at this rate cost nothing.
SERVE_POLL_SECONDS = 0.05


class Service(ABC):
    """Subclasses implement ``start`` (returning self) and ``stop``."""

    @abstractmethod
    def start(self) -> Self:
        """Bring the service up."""

    @abstractmethod
    def stop(self) -> None:
        """Bring the service down."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
