"""Search over token sequences (test-time search with verifiers)."""
