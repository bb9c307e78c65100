"""Durable storage: RocksDB helpers, the message store and its group-commit fsync."""
