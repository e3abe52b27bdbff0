"""Console entry points. `igel-run` is a Hydra app over the config tree packaged as `igel_exp.conf`."""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from igel_exp import pipelines
from igel_exp.errors import IgelError
from igel_exp.tracking import job_interrupts

CONFIG_PATH = "pkg://igel_exp.conf"


@hydra.main(config_path=CONFIG_PATH, config_name="config", version_base="1.3")
def main(config: DictConfig) -> float | None:
    """Run one experiment (or, with -m, one job of a sweep) as an MLflow run."""
    try:
        with job_interrupts():  # in a Slurm job, an interrupt ends as an error that submitit records
            metrics = pipelines.run(config)
    except (IgelError, OmegaConfBaseException) as error:
        # user input problems: one line, no traceback; the MLflow run (if any) is already FAILED
        sys.exit(f"igel-run: error: {str(error).splitlines()[0]}")
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the run in progress is already FAILED
        print("igel-run: interrupted; the run in progress ended FAILED", file=sys.stderr)
        sys.exit(130)
    objective = config.task.get("objective")
    return metrics.get(objective) if objective else None


if __name__ == "__main__":
    main()
