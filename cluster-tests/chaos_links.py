"""Slow and lossy links (ComposeCluster.slow_link, clear_slow_link; the nemesis kind slow-link).

What `tc netem` does to a link, in parts, since this machine's kernel has no sch_netem
("Specified qdisc kind is unknown"):
- a rate limit of everything the node sends: `tc tbf` in its container (a queue builds up,
  so the delay also grows with load);
- random loss of a share of what it exchanges with its peers: iptables `statistic`;
- a fixed delay with jitter: the node's own cluster transport holds every frame it sends to
  a peer for delay +- jitter ms, in order (`POST /api/cluster/test/delay`, raft/transport.py
  `delay`; the chaos nodes run with their test faults enabled). That is where netem would
  put it for the inter-node links, minus the client links, which keep their speed.
"""

from __future__ import annotations

from typing import Any

DELAY_PATH = "/api/cluster/test/delay"


class LinkFaults:
    """ComposeCluster's link faults (its `exec`, `http`, `ip`, `state`, `nodes`, `paused`,
    `shaped` and `_nemesis`), each recorded in the history as process "nemesis"."""

    shaped: dict[str, tuple[int, int, int]]  # node -> (rate kbit/s, loss %, delay ms)
    nodes: list[str]
    paused: dict[str, str]
    exec: Any
    http: Any
    ip: Any
    state: Any
    _nemesis: Any

    def slow_link(self, node: str, rate_kbit: int, loss_pct: int, delay_ms: int = 0, jitter_ms: int = 0) -> None:
        """Slow and lossy links for `node`: what it sends limited to `rate_kbit`, `loss_pct` % of
        what it exchanges with its peers dropped, and what it sends them delayed by `delay_ms`
        +- `jitter_ms`."""
        params = {"node": node, "rate_kbit": rate_kbit, "loss_pct": loss_pct, "delay_ms": delay_ms,
                  "jitter_ms": jitter_ms}  # fmt: skip
        with self._nemesis("slow-link", params, node) as op:
            self.exec(node, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", f"{rate_kbit}kbit",
                      "burst", "32kbit", "latency", "2s")  # fmt: skip
            self.shaped[node] = (rate_kbit, loss_pct, delay_ms)
            if loss_pct:
                for rule in self._loss_rules(node, loss_pct):
                    self.exec(node, "iptables", "-w", "-A", *rule)
            if delay_ms:  # the node's answer, recorded: the delay it applies
                op.ok(delay=self.http(node, "POST", DELAY_PATH, {"ms": delay_ms, "jitter_ms": jitter_ms}))

    def clear_slow_link(self, node: str) -> None:
        with self._nemesis("clear-slow-link", node, node):
            rate_kbit, loss_pct, delay_ms = self.shaped.pop(node, (0, 0, 0))
            if node in self.paused or self.state(node) != "running":
                return  # a killed node's rules went with its network namespace, its delay with its process
            self.exec(node, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
            if loss_pct:
                for rule in self._loss_rules(node, loss_pct):
                    self.exec(node, "iptables", "-w", "-D", *rule, check=False)
            if delay_ms:
                self.http(node, "POST", DELAY_PATH, {"ms": 0})

    def _loss_rules(self, node: str, loss_pct: int) -> list[list[str]]:
        rules = []
        for other in self.nodes:
            if other == node:
                continue
            ip = self.ip(other)
            match = ["-m", "statistic", "--mode", "random", "--probability", f"{loss_pct / 100:.2f}", "-j", "DROP"]
            rules += [["INPUT", "-s", ip, *match], ["OUTPUT", "-d", ip, *match]]
        return rules
