"""A node's worker processes (issue 36, docs/architecture.md "Workers: one
node, N processes"): so far only the link between two workers."""
