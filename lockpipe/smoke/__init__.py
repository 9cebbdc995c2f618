"""Smoke tests of built images: start a server, prove it serves, report what it measured."""
