"""Turn one lock file into reproducible GPU serving images and verified payloads."""

__version__ = "0.1.0"
