"""igel-exp: run, sweep and reproduce IGEL (Inductive Graph Embeddings through Locality Encodings) experiments."""

__version__ = "0.1.0"
