"""Verify images against their provenance and the lock; rebuild and explain differences."""
