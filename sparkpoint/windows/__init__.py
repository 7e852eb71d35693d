"""The window operator and its helpers (merging window sets, window functions)."""
