"""Checkpoints: the coordinator, pending and completed checkpoints, their store and metadata."""
