"""Virtual hosts: routing a message to its queues, the local, remote and quorum queues behind them, and the metadata the hot path reads."""
