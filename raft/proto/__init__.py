"""Generated gRPC/protobuf modules for node-to-node traffic (see cluster.proto)."""
