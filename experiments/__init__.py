# The reproduction plans, installed as the package `igel_exp.experiments` (see pyproject.toml):
# igel-reproduce reads them by default, from any folder.
