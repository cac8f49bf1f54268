"""Tests of the Geonode simulator (scrape_pipeline_local.simulator)."""
