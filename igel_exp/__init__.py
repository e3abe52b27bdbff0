"""igel-exp: run, sweep and reproduce IGEL (Inductive Graph Embeddings through Locality Encodings) experiments."""

import os
from pathlib import Path

__version__ = "0.1.0"


def user_cache_dir() -> Path:
    """igel-exp's folder in the user's cache ($XDG_CACHE_HOME or ~/.cache): downloaded datasets (the default data
    root), link prediction splits (splits/) and reproduction plans (plans/)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "igel-exp"


def __getattr__(name: str):
    # `from igel_exp import IGELModel` without importing torch and MLflow for every `import igel_exp`
    if name == "IGELModel":
        from igel_exp.saved_model import IGELModel

        return IGELModel
    raise AttributeError(f"module 'igel_exp' has no attribute {name!r}")
