"""Publish built images by digest, with their provenance."""
