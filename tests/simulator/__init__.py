"""Tests of the Geonode simulator (devstack.simulator)."""
