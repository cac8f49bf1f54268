"""Local-only tooling: the Geonode simulator, AWS stand-ins, the demo. Never shipped to Lambda.

Its libraries come with the ``local`` extra; ``extra`` checks for them before any import.
"""
