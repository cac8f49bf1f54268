"""Local-only tooling: the Geonode simulator, AWS stand-ins and the demo. Never shipped to Lambda."""
