"""Which process of a data-parallel run writes it, read from any launcher's variables; the SLURM launcher asks for the
nodes and tasks the trainer will use; a single node is no setting."""

from __future__ import annotations

import pytest
from helpers import compose_cfg
from omegaconf import OmegaConf

from attnexp.cli.ranks import is_global_zero
from attnexp.runs.settings import method


@pytest.mark.parametrize(
    ("environ", "zero"),
    [
        ({}, True),  # a run of one process
        ({"LOCAL_RANK": "0", "NODE_RANK": "0"}, True),  # Lightning's own rank 0, once it launched the others
        ({"LOCAL_RANK": "1"}, False),  # a rank Lightning's launcher started on this node
        ({"RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"}, True),  # torchrun, first node
        ({"RANK": "1", "LOCAL_RANK": "0", "GROUP_RANK": "1"}, False),  # torchrun, second node: local rank 0 there
        ({"NODE_RANK": "1"}, False),  # Lightning on a second node started by hand
        ({"SLURM_PROCID": "0", "SLURM_LOCALID": "0"}, True),  # srun's first task
        ({"SLURM_PROCID": "2", "SLURM_LOCALID": "0"}, False),  # srun's first task of a second node
        ({"SLURM_PROCID": "0", "LOCAL_RANK": "1"}, False),  # Lightning's launcher inside one SLURM task
    ],
)
def test_the_writer_is_global_rank_zero_whichever_launcher_started_it(environ, zero):
    assert is_global_zero(environ) is zero


def test_slurm_asks_for_the_nodes_and_a_task_per_device_the_trainer_uses(tmp_path):
    cfg = compose_cfg(["hydra/launcher=slurm", "trainer=ddp", "trainer.devices=4", "trainer.num_nodes=3"], tmp_path)
    launcher = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert (launcher["nodes"], launcher["tasks_per_node"], launcher["gpus_per_node"]) == (3, 4, 4)
    one = compose_cfg(["hydra/launcher=slurm"], tmp_path)
    assert OmegaConf.to_container(one.hydra.launcher, resolve=True)["nodes"] == 1


def test_one_node_is_the_setting_a_record_without_the_key_has():
    old = {"trainer": {"devices": 1, "max_epochs": 5}}
    assert method({"trainer": {**old["trainer"], "num_nodes": 1}}) == method(old)
    assert method({"trainer": {**old["trainer"], "num_nodes": 2}}) != method(old)
