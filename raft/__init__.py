"""Raft replication for Warren: pysyncobj behind a durable journal, narrow patches,
explicit command records and the node-to-node transport."""
