"""Task evaluators: pure functions of graphs and embeddings that return metrics (no I/O, no tracking)."""
