"""Which experiments a protocol other than `faithful` is defined for (the `protocol=` config group).

`protocol=faithful` (the default) runs what the paper describes; another protocol is a set of switches per task and
dataset, conf/specialise/protocol/<protocol>_<task>_<dataset>.yaml, that set ordinary keys of the boxes. Hydra applies
such a file when it exists and silently skips it otherwise (an `optional` default), so a protocol asked of a task and
dataset without a file would run the faithful computation under another name: `check_protocol` refuses it first.
"""

from __future__ import annotations

from omegaconf import DictConfig

from igel_exp.errors import ConfigError
from igel_exp.schema import group_options

DEFAULT = "faithful"
SWITCHES = ("specialise", "protocol")  # the folder of the switch files in the packaged config tree


def defined(protocol: str) -> list[tuple[str, str]]:
    """The (task, dataset) pairs with a switch file for `protocol`; the task options (conf/task) tell where a file
    name's task ends, as both may hold underscores."""
    tasks = group_options("task")
    pairs = []
    for stem in group_options(*SWITCHES):
        if stem.startswith(f"{protocol}_"):
            rest = stem.removeprefix(f"{protocol}_")
            task = max((task for task in tasks if rest.startswith(f"{task}_")), key=len, default=None)
            if task is not None:
                pairs.append((task, rest.removeprefix(f"{task}_")))
    return pairs


def check_protocol(config: DictConfig) -> None:
    """Raise ConfigError unless the config's protocol is faithful or defined for its task and dataset."""
    protocol = config.get("protocol", DEFAULT)
    if protocol == DEFAULT:
        return
    task, dataset = str(config.task.name), str(config.dataset.name)
    pairs = defined(str(protocol))
    if (task, dataset) in pairs:
        return
    if not pairs:
        valid = ", ".join(group_options("protocol"))
        raise ConfigError(f"protocol={protocol} has no switches: valid protocols: {valid}")
    have = {}
    for defined_task, defined_dataset in pairs:
        have.setdefault(defined_task, []).append(defined_dataset)
    listed = "; ".join(f"experiment={name} (dataset={', '.join(have[name])})" for name in sorted(have))
    raise ConfigError(
        f"protocol={protocol} is not defined for task={task} on dataset={dataset}; it is defined for {listed}"
    )
