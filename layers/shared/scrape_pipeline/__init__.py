"""Collect the results of asynchronous Geonode Scraper API jobs: none lost, none twice."""
