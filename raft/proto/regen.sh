#!/bin/sh
# Regenerate the gRPC/protobuf modules from cluster.proto.
# Run from anywhere; needs grpcio-tools (the [test] extra).
# The generated files are committed: the node does not need grpcio-tools.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-"$root/.venv/bin/python"}
cd "$root"
"$python" -m grpc_tools.protoc -I . \
    --python_out=. --grpc_python_out=. \
    raft/proto/cluster.proto
