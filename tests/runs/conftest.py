"""The runs tests use the simulator, its manual clock and a client on it as the client's own
integration tests start them (``clock``, ``server``, ``client``)."""

from tests.integration.test_client_simulator import client, clock, server

__all__ = ["client", "clock", "server"]
