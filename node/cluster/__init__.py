"""The cluster: node identity and membership, the Raft groups ticked on the shared transport, node-to-node RPC, liveness and alarm gossip."""
