# The Hydra config tree, installed as the package `igel_exp.conf` (see pyproject.toml).
