"""POST /api/tls/reload: the node reads its TLS certificate, key and CA again
(as SIGHUP does) for new handshakes; open connections keep theirs. Warren's
own path: RabbitMQ reloads certificates through rabbitmqctl eval."""

from __future__ import annotations

from aiohttp import web

from node.client.tls import TlsError
from node.http.route_kit import ADMIN, access, api_of, bad_request, json_response, not_found


@access(ADMIN)
async def reload_tls(request: web.Request) -> web.Response:
    node = api_of(request).node
    try:
        reloaded = node.reload_tls()
    except TlsError as e:  # the files in place do not load: the node keeps the ones it had
        raise bad_request(str(e)) from None
    if not reloaded:
        raise not_found("TLS is not configured on this node (tls_cert)")
    return json_response(request, {"reloaded": True, "reloads": node.tls.reloads})


ROUTES = [("POST", "/api/tls/reload", reload_tls)]
