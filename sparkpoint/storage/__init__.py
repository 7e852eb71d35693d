"""Durable checkpoint storage on any fsspec file system."""
