"""A run's identity: the hash of its resolved config, seed included, storage and execution keys left out."""

import mlflow
from omegaconf import OmegaConf

from igel_exp.identity import HASH_TAG, config_hash
from igel_exp.tracking import tracked_run


def test_storage_and_execution_keys_leave_the_identity_alone(compose_config):
    base = compose_config("seed=3")
    elsewhere = compose_config(
        "seed=3",
        "threads=1",
        "progress=false",
        "tracking.uri=sqlite:///other.db",
        "data.root=/somewhere/else",
        "data.download=false",
        "trainer.device=cpu",
    )
    assert config_hash(elsewhere) == config_hash(base)


def test_seed_and_settings_change_the_identity_a_grid_point_pools_seeds(compose_config):
    base = compose_config("seed=3")
    other_seed, other_setting = compose_config("seed=4"), compose_config("seed=3", "trainer.epochs=2")
    assert len({config_hash(base), config_hash(other_seed), config_hash(other_setting)}) == 3
    assert config_hash(base, without=("seed",)) == config_hash(other_seed, without=("seed",))
    assert config_hash(base, without=("seed",)) != config_hash(other_setting, without=("seed",))


def test_identity_ignores_key_order_and_the_reproduce_block():
    first = {"seed": 1, "encoder": {"distance": 2, "transform": "log"}, "reproduce": {"table": "T"}}
    second = {"encoder": {"transform": "log", "distance": 2}, "seed": 1}
    assert config_hash(first) == config_hash(second)
    assert config_hash(first) != config_hash({**second, "encoder": {"transform": "log", "distance": 3}})


def test_every_run_is_tagged_with_its_identity(compose_config, store_uri):
    config = compose_config("seed=5", "encoder.distance=2")
    with tracked_run(config, "toy") as logger:
        pass
    assert mlflow.get_run(logger.run_id).data.tags[HASH_TAG] == config_hash(config)


def test_a_setting_added_later_keeps_earlier_runs_identity_at_its_neutral_value(compose_config):
    recorded_before = OmegaConf.to_container(compose_config("seed=3"), resolve=True)
    del recorded_before["trainer"]["batch_scale"]  # as a run recorded before trainer.batch_scale existed
    assert config_hash(compose_config("seed=3", "trainer.batch_scale=1")) == config_hash(recorded_before)
    assert config_hash(compose_config("seed=3", "trainer.batch_scale=4")) != config_hash(recorded_before)
    assert config_hash(compose_config("seed=3", "trainer.cuda_graphs=false")) == config_hash(recorded_before)
