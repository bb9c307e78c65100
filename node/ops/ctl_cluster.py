"""`warren ctl`'s cluster commands: status, join and forget, feature flags,
quorum queue members and snapshot export."""

from __future__ import annotations

import argparse
import base64
import os
import sys

from node.ops.ctl_kit import (
    Client,
    CommandTable,
    Done,
    Listing,
    Report,
    _q,
    table,
)

COMMANDS = CommandTable()


def _cluster_report(s: dict) -> Report:
    lines = [f"Cluster status of node {s.get('node_name', s['node'])} ({s['node']}) ..."]
    if s.get("failed"):
        lines.append(f"FAILED: {s['failed']}")
    lines.append(f"Role: {s['role']}, term {s.get('term')}, leader {s.get('leader') or '(none)'}")
    lines.append(f"Commit index: {s.get('commit_index')}, last applied: {s.get('last_applied')}")
    lines.append(f"Members ({s.get('reachable')} of {len(s['members'])} reachable,"
                 f" {'majority' if s.get('majority') else 'NO majority'}):")  # fmt: skip
    rows = [{"node": m["node"], "role": "leader" if m["leader"] else "follower", "reachable": m["reachable"],
             "this_node": m["self"]} for m in s["members"]]  # fmt: skip
    lines.append(table(rows, ["node", "role", "reachable", "this_node"]))
    return Report(s, "\n".join(lines))


@COMMANDS.command("cluster_status", "this node's view of the cluster: leader, term, members and their reachability")
def cluster_status(client: Client, args: argparse.Namespace) -> Report:
    return _cluster_report(client.get("/api/cluster"))


@COMMANDS.command("join_cluster", "SEED: reset this node and join the cluster of SEED (its cluster address host:port)")
def join_cluster(client: Client, args: argparse.Namespace) -> Done:
    client.post("/api/cluster/join", {"seed": args.seed})
    return Done(f"Clustering node with {args.seed} ...")


@COMMANDS.command("forget_cluster_node", "NODE: remove a stopped member (its cluster address host:port) from the cluster")
def forget_cluster_node(client: Client, args: argparse.Namespace) -> Done:
    status = client.post("/api/cluster/forget", {"node": args.node}) or {}
    lines = [f"Removing node {args.node} from the cluster ..."]
    for q in status.get("queues_shrunk", []):  # its replicas of quorum queues and streams went with it
        what = f"{q['type']} '{q['name']}' in vhost '{q['vhost']}'"
        lines.append(f"{what}: replica kept: {q['error']}" if "error" in q else f"{what}: replica removed")
    return Done("\n".join(lines))


@COMMANDS.command("list_feature_flags", "feature flags: name, state (enabled, disabled, unavailable), stability")
def list_feature_flags(client: Client, args: argparse.Namespace) -> Listing:
    rows = [{**f, "unsupported_by": ",".join(f.get("unsupported_by", []))} for f in client.get("/api/feature_flags")]
    return Listing(rows, args.columns or ["name", "state", "stability", "unsupported_by"],
                   "Listing feature flags ...", "name desc stability introduced_in depends_on state unsupported_by")


@COMMANDS.command("enable_feature_flag", "NAME|all: enable a feature flag (all: every stable flag every member supports)")
def enable_feature_flag(client: Client, args: argparse.Namespace) -> Done:
    client.put(f"/api/feature_flags/{_q(args.name)}/enable", {})
    return Done(f'Enabling feature flag "{args.name}" ...')


@COMMANDS.command("add_member", "[-p VHOST] QUEUE NODE: add a replica (a member's cluster address) to a quorum queue or a replicated stream")
def add_member(client: Client, args: argparse.Namespace) -> Done:
    client.post(f"/api/quorum-queues/{_q(args.vhost)}/{_q(args.name)}/members", {"node": args.node})
    return Done(f'Adding a replica for queue "{args.name}" on node {args.node} ...')


@COMMANDS.command("delete_member", "[-p VHOST] QUEUE NODE: remove a replica from a quorum queue or a replicated stream")
def delete_member(client: Client, args: argparse.Namespace) -> Done:
    client.delete(f"/api/quorum-queues/{_q(args.vhost)}/{_q(args.name)}/members/{_q(args.node)}")
    return Done(f'Removing the replica of queue "{args.name}" on node {args.node} ...')


def _each_queue(client: Client, op: str, node: str) -> Listing:
    rows = [{**r, "members": ",".join(r.get("members", [])), "error": r.get("error", "")}
            for r in client.post(f"/api/quorum-queues/{op}", {"node": node})]  # fmt: skip
    return Listing(rows, ["vhost", "name", "ok", "members", "error"], f"{op.capitalize()} quorum queues ...",
                   "vhost name ok members error")  # fmt: skip


@COMMANDS.command("grow", "NODE: add NODE as a replica of every quorum queue and replicated stream that lacks it")
def grow(client: Client, args: argparse.Namespace) -> Listing:
    return _each_queue(client, "grow", args.node)


@COMMANDS.command("shrink", "NODE: remove NODE's replica from every quorum queue and replicated stream")
def shrink(client: Client, args: argparse.Namespace) -> Listing:
    return _each_queue(client, "shrink", args.node)


@COMMANDS.command("export_snapshots", "DIR: copy every member's cluster-state snapshot files into DIR/<member>/ (for warren audit)")
def export_snapshots(client: Client, args: argparse.Namespace) -> Done:
    copied = 0
    for entry in client.get("/api/snapshots"):
        member = entry["node"]
        if "error" in entry:
            print(f"warning: {member}: {entry['error']}", file=sys.stderr)
            continue
        target = os.path.join(args.directory, member.replace(":", "_").replace("/", "_"))
        os.makedirs(target, exist_ok=True)
        for f in entry["files"]:
            with open(os.path.join(target, f["name"]), "wb") as out:
                offset = 0
                while True:
                    chunk = client.get(f"/api/snapshots/{_q(member)}/{_q(f['name'])}?offset={offset}")
                    data = base64.b64decode(chunk["data"])
                    out.write(data)
                    offset += len(data)
                    if chunk["eof"]:
                        break
            copied += 1
    return Done(f"Exported {copied} snapshot files to {args.directory}")
