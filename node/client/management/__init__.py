"""The `/management` node: HTTP-over-AMQP requests ("HTTP API v2") on a
management link pair.

- `request.py`: the requests themselves, path and body in, status and body
  out, against one vhost's topology; no links, frames or sockets.
- `node_link.py`: the link pair on a session: pairing the two halves,
  request credit, replies held until the client grants credit.
"""
