"""The Geonode Scraper API: its client, errors, typed results and settings."""
