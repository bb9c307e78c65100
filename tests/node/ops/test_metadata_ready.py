"""A starting node's first metadata commits (node/vhosts/metadata_ready.py) against the real
metadata machine, through a proposer that loses answers as a busy Raft group does."""

from __future__ import annotations

import asyncio

from metadata import commands as mc
from metadata.machine import MetadataMachine
from node.cluster.cluster import ClusterError
from node.cluster.machine import local_flags
from node.config import Config
from node.vhosts.metadata_ready import metadata_ready
from node.vhosts.metadata_store import MetadataStore


class LosingProposer:
    """Applies every command to the machine, as a commit that did happen, but answers the
    first `lose` Bootstraps with the timeout a proposer raises when the answer came too late
    ("the command was in flight and may still be applied")."""

    node_id = "n1:25672"

    def __init__(self, machine: MetadataMachine, lose: int) -> None:
        self.machine, self.lose, self.index = machine, lose, machine.last_index

    async def propose(self, command, timeout=None, *, idempotent=None):
        self.index += 1
        result = self.machine.apply(command, self.index)
        if self.lose > 0 and isinstance(command, mc.Bootstrap):
            self.lose -= 1
            raise ClusterError("not committed within 5s (3 of 3 members reachable); the command was in flight")
        return result

    async def fence(self, timeout=None) -> None:
        pass


def test_a_first_commit_that_times_out_is_tried_again_not_fatal():
    # a node killed -9 and started again under load exited here (the chaos suite's kill9 kind)
    machine = MetadataMachine()
    proposer = LosingProposer(machine, lose=0)
    cfg = Config(cluster_ready_timeout=30)
    asyncio.run(metadata_ready(proposer, MetadataStore(machine, proposer.propose), local_flags(), cfg))
    proposer.lose = 2  # the next two Bootstraps lose their answers
    again = MetadataStore(machine, proposer.propose)
    asyncio.run(metadata_ready(proposer, again, local_flags(), cfg))
    assert proposer.lose == 0
    assert "/" in machine.state.vhosts and cfg.default_user in machine.state.users


def test_a_blank_cluster_set_up_by_a_bootstrap_whose_answer_was_lost_is_set_up_once():
    machine = MetadataMachine()
    proposer = LosingProposer(machine, lose=1)  # the Bootstrap that sets the cluster up
    cfg = Config(cluster_ready_timeout=30)
    asyncio.run(metadata_ready(proposer, MetadataStore(machine, proposer.propose), local_flags(), cfg))
    assert "/" in machine.state.vhosts and cfg.default_user in machine.state.users
    # the Bootstrap's retry (same key) still knew it had set the cluster up: the flags went on
    assert set(local_flags().default_enabled()) <= set(machine.state.feature_flags)
