"""The wall-time estimate of igel-reproduce --dry-run: the store's runs first, then the cost model."""

import pytest

from igel_exp.errors import ConfigError
from igel_exp.estimate import (
    OTHER_HARDWARE,
    REUSE_S,
    Duration,
    Estimator,
    Kind,
    duration_text,
    job_hardware,
    load_kinds,
    work,
)
from igel_exp.plan import load_plan

from conftest import REPO

TABLE = {"table": "Tiny", "rows": ["encoder.distance"], "columns": {"PageRank": "spearman_pagerank"}}
SKIPGRAM = {
    "trainer.objective": "skipgram",
    "trainer.epochs": 2,
    "trainer.walks_per_node": 3,
    "trainer.walk_length": 10,
    "trainer.window": 4,
    "trainer.negatives": 5,
}


def test_work_counts_walk_positions_times_their_scores():
    assert work(SKIPGRAM) == 2 * 3 * 10 * (2 * 4 + 5)
    assert work({**SKIPGRAM, "dataset.num_nodes": 100}) == 2 * 3 * 10 * 13 * 100
    supervised = {"trainer.objective": "supervised", "trainer.epochs": 1000, "trainer.patience": 100}
    assert work(supervised) == 150  # early stopping: patience epochs past an assumed best epoch
    assert work({**supervised, "trainer.epochs": 30}) == 30  # at most its epochs
    assert work({"trainer.objective": "supervised", "trainer.epochs": 1000}) == 1.0  # no patience: no estimate
    # as MLflow params: strings
    assert work({key: str(value) for key, value in SKIPGRAM.items()}) == 780


def params(plan_job, **changes) -> dict:
    return {key: str(value) for key, value in {**plan_job.flat, **changes}.items()}


def test_the_store_is_used_before_the_cost_model(experiments_dir):
    plan = load_plan(experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE), "quick")
    one, two = plan.jobs[0], plan.jobs[2]  # distance 1 and 2, seed 0
    kinds = [Kind({"name": "clustering", "encoder.distance": 1}, 1.0, 0.5), Kind({"name": "clustering"}, 2.0, 1.0)]
    model = Estimator([], kinds)
    assert model.job(one) == (1.0 + 0.5 * work(one.flat), "the cost model (costs.yaml)")
    assert model.job(two) == (2.0 + work(two.flat), "the cost model (costs.yaml)")
    # runs of the same grid point (another seed): their median; of the same kind: their rate, scaled by work
    here = job_hardware(one.flat)  # this machine, where the jobs would run
    stored = [
        Duration(params(plan.jobs[1]), 7.0, hardware=here),  # distance 1, seed 1
        Duration(params(plan.jobs[1]), 9.0, hardware=here),
        Duration(params(plan.jobs[1]), 20.0, hardware=here),
        Duration(params(two, **{"trainer.epochs": 2}), 2.0 + 0.3 * work(two.flat) * 2, hardware=here),  # kind 2
    ]
    model = Estimator(stored, kinds)
    assert model.job(one) == (9.0, "the store's runs of the same grid point")
    seconds, source = model.job(plan.jobs[3])  # distance 2, seed 1: no run of its point, one of its kind
    assert source == "the store's runs of its kind" and seconds == pytest.approx(2.0 + 0.3 * work(two.flat))
    total = model.jobs([one, two], extra=2)
    assert total.seconds == pytest.approx(9.0 + seconds + 2 * (9.0 + seconds) / 2)
    assert total.sources == {
        "the store's runs of the same grid point": 1,
        "the store's runs of its kind": 1,
        "the mean of the selection runs": 2,
    }
    assert Estimator([], []).job(one) == (None, "no estimate (a kind the cost model lacks)")


def test_the_store_s_runs_on_the_hardware_a_job_would_run_on_are_preferred(experiments_dir):
    plan = load_plan(experiments_dir("tiny", {"encoder.distance": "1,2", "seed": "range(2)"}, TABLE), "quick")
    one, two = plan.jobs[0], plan.jobs[2]  # distance 1 and 2, seed 0
    here = job_hardware(one.flat)
    assert here is not None and here == job_hardware(two.flat)
    kinds = [Kind({"name": "clustering", "encoder.distance": 1}, 1.0, 1.0), Kind({"name": "clustering"}, 1.0, 1.0)]
    elsewhere = "NVIDIA H200"  # as a GPU run of the same store would be tagged
    other_point = params(two, **{"trainer.epochs": 4})  # the kind of both, not the point of either
    stored = [
        Duration(params(plan.jobs[1]), 10.0, hardware=here),  # distance 1, seed 1: here, and twice elsewhere
        Duration(params(plan.jobs[1]), 2.0, hardware=elsewhere),
        Duration(params(plan.jobs[1]), 3.0, hardware=elsewhere),
        Duration(other_point, 1.0 + 4.0 * work(other_point), hardware=here),  # 4 s a unit of work here, 0.5 elsewhere
        Duration(other_point, 1.0 + 0.5 * work(other_point), hardware=elsewhere),
        Duration(other_point, 1.0 + 0.5 * work(other_point), hardware=elsewhere),
    ]
    model = Estimator(stored, kinds)
    assert model.job(one) == (10.0, "the store's runs of the same grid point")  # not the median of all three, 3.0
    seconds, source = model.job(two)
    assert source == "the store's runs of its kind" and seconds == pytest.approx(1.0 + 4.0 * work(two.flat))
    # where none ran on this hardware, all of them count, and the source says so
    model = Estimator([run for run in stored if run.hardware != here], kinds)
    assert model.job(one) == (2.5, f"the store's runs of the same grid point{OTHER_HARDWARE}")
    seconds, source = model.job(two)
    assert source == f"the store's runs of its kind{OTHER_HARDWARE}" and seconds == pytest.approx(
        1 + work(two.flat) / 2
    )
    # runs made before the tag ("") are not this hardware's either
    model = Estimator([Duration(params(plan.jobs[1]), 6.0)], kinds)
    assert model.job(one) == (6.0, f"the store's runs of the same grid point{OTHER_HARDWARE}")


def test_the_shipped_cost_model_covers_every_table_of_the_paper():
    model = Estimator([], load_kinds())
    for path in sorted((REPO / "experiments").glob("*.yaml")):
        for job in load_plan(path, "quick").jobs:
            seconds, source = model.job(job)
            assert seconds is not None and seconds > 0, (path.name, job.shown, source)


def test_a_malformed_cost_model_fails_with_one_line():
    with pytest.raises(ConfigError, match="costs.yaml: kind 2 needs match, start_s and per_unit_s"):
        load_kinds("kinds:\n  - {match: {name: a}, start_s: 1, per_unit_s: 2}\n  - {match: {name: b}, start_s: 1}\n")


@pytest.mark.parametrize(
    "seconds, text", [(12.4, "12 s"), (600, "10 min"), (3900, "1 h 05 min"), (73200, "20 h 20 min")]
)
def test_durations_read_as_hours_and_minutes(seconds, text):
    assert duration_text(seconds) == text


def test_a_job_that_reuses_an_earlier_jobs_embeddings_costs_a_reuse(experiments_dir):
    table = {"table": "Tiny", "rows": ["encoder.distance", "task.k"], "columns": {"F1": "f1_cluster"}}
    sweep = {"encoder.distance": "1,2", "task.k": "5,6", "seed": "0"}  # α slowest: k = 5 trains, k = 6 reuses
    plan = load_plan(experiments_dir("sister", sweep, table, experiment="sister_cities"), "quick")
    model = Estimator([], [Kind({"name": "sister_cities"}, 30.0, 0.0)])
    total = model.jobs(plan.jobs)  # α = 1 trains at k = 5 and reuses at k = 6; α = 2 alike
    assert total.seconds == 2 * 30.0 + 2 * REUSE_S
    assert total.sources == {"the cost model (costs.yaml)": 2, "the reuse of an earlier job's embeddings": 2}
    # trained by a table above (or finished in the store): every job reuses
    trained: set[str] = set()
    model.jobs(plan.jobs[:1], trained=trained)
    assert model.jobs(plan.jobs[1:2], trained=trained).seconds == REUSE_S
    # a stored run that reused says nothing of a training's cost
    stored = Estimator([Duration(params(plan.jobs[1]), 4.0, reused=True)], [Kind({"name": "sister_cities"}, 1.0, 1.0)])
    assert stored.rates == {}
