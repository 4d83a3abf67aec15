"""runs package."""
