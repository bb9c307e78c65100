"""A starting node's first meeting with the metadata (node/broker.py's start):
wait until this node has caught up through a majority (a node needs a quorum
to start, as with Khepri), announce it, and on a blank cluster create the
defaults with every stable feature flag on."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import TYPE_CHECKING

from metadata import commands as mc
from metadata.feature_flags import FeatureFlagRegistry, local_member
from node import __version__
from node.cluster.cluster import ClusterError
from node.vhosts.metadata_store import MetadataRefused, MetadataStore, MetadataUnavailable, new_key
from routing.users import hash_password

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster
    from node.config import Config

__all__ = ["metadata_ready"]

log = logging.getLogger("warren.node")

DEFAULT_VHOST_DESCRIPTION = "Default virtual host"  # as RabbitMQ's


async def metadata_ready(cluster: Cluster, metadata: MetadataStore, flags: FeatureFlagRegistry, cfg: Config) -> None:
    """Returns once this node is a known member of a set-up cluster; raises ClusterError
    when no majority answered within setting cluster_ready_timeout. `flags`: this node's."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cfg.cluster_ready_timeout
    # one key for every attempt: a retry after a lost answer learns whether
    # this node's Bootstrap was the one that set the blank cluster up
    password_hash = hash_password(cfg.default_password, algorithm=cfg.password_hashing_module)
    bootstrap = mc.Bootstrap(new_key(), "/", DEFAULT_VHOST_DESCRIPTION, cfg.default_user, password_hash,
                             ("administrator",))  # fmt: skip
    while True:
        try:
            await cluster.fence()
            await cluster.propose(local_member(cluster.node_id, __version__, flags))
            if await metadata.created(bootstrap):
                await _enable_default_flags(metadata, flags)
                await _seed_cluster_id(metadata)
            await _seed_cluster_name(metadata, cfg.cluster_name)
            return
        except (ClusterError, MetadataUnavailable) as e:  # a commit that timed out too: tried again
            if loop.time() >= deadline:
                raise ClusterError(f"the metadata store did not become available in "
                                   f"{cfg.cluster_ready_timeout:g}s: {e}") from None  # fmt: skip
            log.warning("waiting for a majority of the cluster to start: %s", e)


async def _seed_cluster_id(metadata: MetadataStore) -> None:
    """The cluster's permanent id, as RabbitMQ seeds it when a cluster is
    formed: the global parameter internal_cluster_id, kept for the cluster's
    life (rabbitmq_identity_info's rabbitmq_cluster_permanent_id)."""
    value = "rabbitmq-cluster-id-" + secrets.token_urlsafe(16)
    try:
        await metadata.run(mc.SetGlobalParameter(new_key(), "internal_cluster_id", value))
    except MetadataRefused as e:  # the global_parameters flag is off
        log.warning("no internal_cluster_id on this new cluster: %s", e)


async def _seed_cluster_name(metadata: MetadataStore, name: str) -> None:
    """Setting cluster_name, as RabbitMQ seeds its configured cluster_name at
    every boot: the configuration wins over a name set at run time. Unchanged
    names cost nothing (the machine answers without an effect)."""
    if not name:
        return
    try:
        await metadata.run(mc.SetGlobalParameter(new_key(), "cluster_name", name))
    except MetadataRefused as e:  # the global_parameters flag is off
        log.warning("setting cluster_name %r not applied: %s", name, e)


async def _enable_default_flags(metadata: MetadataStore, flags: FeatureFlagRegistry) -> None:
    """A brand-new cluster starts with every stable flag on (RabbitMQ
    does the same); only a cluster that existed before a flag was known
    keeps it off until an operator enables it. A member that joined
    already and lacks a flag keeps that flag off: the machine refuses it."""
    for name in flags.default_enabled():
        try:
            await metadata.run(mc.EnableFeatureFlag(new_key(), name))
        except MetadataRefused as e:
            log.warning("feature flag %s stays disabled on this new cluster: %s", name, e)
