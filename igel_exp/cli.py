"""Console entry points: `igel-run` and `igel-embed`, Hydra apps over the config tree packaged as `igel_exp.conf`
(primary configs `config` and `embed`)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import hydra
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from igel_exp import pipelines
from igel_exp.errors import IgelError
from igel_exp.pipelines.embed import embed as embed_graph
from igel_exp.tracking import job_interrupts

CONFIG_PATH = "pkg://igel_exp.conf"


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def main(config: DictConfig) -> float | None:
    """Run one experiment (or, with -m, one job of a sweep) as an MLflow run."""
    metrics = _guarded("igel-run", pipelines.run, config)
    objective = config.task.get("objective")
    return metrics.get(objective) if objective else None


@hydra.main(config_path=CONFIG_PATH, config_name="embed", version_base="1.3")
def embed(config: DictConfig) -> None:
    """Embed a graph with the frozen model of an earlier run, as an MLflow run of experiment `embed`."""
    _guarded("igel-embed", embed_graph, config)


def _guarded(program: str, work: Callable[[DictConfig], dict], config: DictConfig) -> dict:
    """`work(config)`; user input problems and interrupts end the process with one line, no traceback."""
    try:
        with job_interrupts():  # in a Slurm job, an interrupt ends as an error that submitit records
            return work(config)
    except (IgelError, OmegaConfBaseException) as error:
        # the MLflow run (if any) is already FAILED
        sys.exit(f"{program}: error: {str(error).splitlines()[0]}")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run in progress is already FAILED
        print(f"{program}: interrupted; the run in progress ended FAILED", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
