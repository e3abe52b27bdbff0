# The Hydra config tree, installed as the package `igel_exp.conf` (see pyproject.toml). Importing it stores the
# schema that the files name in their defaults lists (schema/<group>/<kind>, igel_schema) in Hydra's ConfigStore:
# Hydra imports this package before it reads a file of it, whichever command composes the configs.
from igel_exp.schema import register

register()
