"""Local-only tooling: the Geonode simulator, AWS stand-ins, the demo. Never shipped to Lambda."""
