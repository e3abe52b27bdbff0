"""igel-exp: run, sweep and reproduce IGEL (Inductive Graph Embeddings through Locality Encodings) experiments."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `from igel_exp import IGELModel` without importing torch and MLflow for every `import igel_exp`
    if name == "IGELModel":
        from igel_exp.saved_model import IGELModel

        return IGELModel
    raise AttributeError(f"module 'igel_exp' has no attribute {name!r}")
