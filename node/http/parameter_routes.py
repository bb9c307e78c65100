"""Management API handlers for runtime parameters, as RabbitMQ's:

    GET    /api/parameters[/{component}[/{vhost}]]     [{"vhost", "component", "name", "value"}]
    GET    /api/parameters/{component}/{vhost}/{name}
    PUT    /api/parameters/{component}/{vhost}/{name}  body {"value": ...}
    DELETE /api/parameters/{component}/{vhost}/{name}
    GET    /api/global-parameters[/{name}]             [{"name", "value"}]
    PUT    /api/global-parameters/{name}               body {"value": "..."}

The components Warren has are RabbitMQ's `vhost-limits` (name "limits",
value {"max-connections": N, "max-queues": N}: the vhost's limits, replaced
as a whole), `operator_policy` (value {"pattern", "definition",
"priority", "apply-to"}: an operator policy) and `shovel` (a dynamic shovel,
node/shovel/definition.py checks its keys; kept as a metadata parameter);
another component (`federation-upstream`, ...) is 400 naming it, as
RabbitMQ answers for a plugin it does not run. Global parameters are the ones the metadata keeps
(metadata/commands.py GLOBAL_PARAMETER_NAMES); they cannot be cleared.
Listing and reading take a policymaker or an administrator, as RabbitMQ's.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from metadata import commands as mc
from node.http.policy_routes import parse_policy
from node.http.route_kit import (
    ADMIN,
    MGMT,
    USER,
    access,
    api_of,
    bad_request,
    check_policymaker,
    created_or_updated,
    json_response,
    no_content,
    not_found,
    read_body,
)
from node.shovel import definition as shovel_definition
from node.vhosts.metadata_store import new_key

VHOST_LIMITS, OPERATOR_POLICY, SHOVEL = "vhost-limits", "operator_policy", "shovel"
COMPONENTS = (VHOST_LIMITS, OPERATOR_POLICY, SHOVEL)
LIMIT_NAMES = ("max-connections", "max-queues")
_MAX_VALUE = 2**31 - 1


def _component(request: web.Request) -> str:
    component = request.match_info["component"]
    if component not in COMPONENTS:
        raise bad_request(f"component {component} not found (Warren has {', '.join(COMPONENTS)})")
    return component


def _parameters(request: web.Request, component: str | None = None, vhost: str | None = None) -> list[dict]:
    api = api_of(request)
    node = api.node
    names = [vhost] if vhost is not None else [v.name for v in api.visible_vhosts(request[USER])]
    out = []
    if component in (None, VHOST_LIMITS):
        for name in names:
            limits = {limit: value for (scope, owner, limit), value in sorted(node.projections.limits.items())
                      if scope == "vhost" and owner == name}  # fmt: skip
            if limits:
                out.append({"vhost": name, "component": VHOST_LIMITS, "name": "limits", "value": limits})
    if component in (None, OPERATOR_POLICY):
        for name in names:
            for p in node.projections.vhost_policies(name, True):
                value = {"pattern": p.pattern, "definition": dict(p.definition), "priority": p.priority,
                         "apply-to": p.apply_to}  # fmt: skip
                out.append({"vhost": name, "component": OPERATOR_POLICY, "name": p.name, "value": value})
    if component in (None, SHOVEL):
        wanted = set(names)
        for (vhost, kind, name), value in sorted(node.projections.parameters.items()):
            if kind == SHOVEL and vhost in wanted:
                out.append({"vhost": vhost, "component": SHOVEL, "name": name, "value": json.loads(value)})
    return out


@access(MGMT)
async def list_parameters(request: web.Request) -> web.Response:
    check_policymaker(request)
    component = _component(request) if "component" in request.match_info else None
    vhost = request.match_info.get("vhost")
    if vhost is not None:
        vhost = api_of(request).vhost(vhost).name
    return json_response(request, _parameters(request, component, vhost))


def _one(request: web.Request) -> dict | None:
    component, name = _component(request), request.match_info["name"]
    vhost = api_of(request).vhost(request.match_info["vhost"]).name
    return next((p for p in _parameters(request, component, vhost) if p["name"] == name), None)


@access(MGMT)
async def get_parameter(request: web.Request) -> web.Response:
    check_policymaker(request)
    parameter = _one(request)
    if parameter is None:
        raise not_found()
    return json_response(request, parameter)


@access(ADMIN)
async def put_parameter(request: web.Request) -> web.Response:
    existing = _one(request)
    component, vhost, name = _component(request), request.match_info["vhost"], request.match_info["name"]
    body = await read_body(request)
    if "value" not in body:
        raise bad_request("the body needs a 'value'")
    value = body["value"]
    run = api_of(request).node.metadata.run
    if component == VHOST_LIMITS:
        if name != "limits":
            raise bad_request("a vhost-limits parameter is named 'limits'")
        limits = _limits(value)
        for (scope, owner, limit), _ in list(api_of(request).node.projections.limits.items()):
            if scope == "vhost" and owner == vhost and limit not in limits:
                await run(mc.ClearLimit(new_key(), "vhost", vhost, limit))
        for limit, n in limits.items():
            await run(mc.SetLimit(new_key(), "vhost", vhost, limit, n))
    elif component == SHOVEL:
        try:
            shovel_definition.parse(value)
        except shovel_definition.DefinitionError as e:
            raise bad_request(f"shovel '{name}': {e}") from None
        await run(mc.SetParameter(new_key(), vhost, SHOVEL, name, shovel_definition.encode(value)))
    else:
        if not isinstance(value, dict):
            raise bad_request("an operator_policy value is an object: pattern, definition, priority, apply-to")
        pattern, apply_to, definition, priority = parse_policy(value, True)
        await run(mc.SetOperatorPolicy(new_key(), vhost, name, pattern, apply_to, definition, priority))
    return created_or_updated(existing is None)


def _limits(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise bad_request('a vhost-limits value is an object: {"max-connections": N, "max-queues": N}')
    for limit, n in value.items():
        if limit not in LIMIT_NAMES:
            raise bad_request(f"unknown vhost limit '{limit}' (Warren has {', '.join(LIMIT_NAMES)})")
        if type(n) is not int or not -_MAX_VALUE <= n <= _MAX_VALUE:
            raise bad_request(f"vhost limit '{limit}' must be an integer, got {n!r}")
    return value


@access(ADMIN)
async def delete_parameter(request: web.Request) -> web.Response:
    parameter = _one(request)
    if parameter is None:
        raise not_found()
    vhost, run = parameter["vhost"], api_of(request).node.metadata.run
    if parameter["component"] == VHOST_LIMITS:
        for limit in parameter["value"]:
            await run(mc.ClearLimit(new_key(), "vhost", vhost, limit))
    elif parameter["component"] == SHOVEL:
        await run(mc.ClearParameter(new_key(), vhost, SHOVEL, parameter["name"]))
    else:
        await run(mc.ClearOperatorPolicy(new_key(), vhost, parameter["name"]))
    return no_content()


# ---------------------------------------------------------------- global parameters


def _globals(request: web.Request) -> list[dict]:
    values = api_of(request).node.projections.global_parameters
    return [{"name": name, "value": value} for name, value in sorted(values.items())]


@access(ADMIN)
async def list_global_parameters(request: web.Request) -> web.Response:
    return json_response(request, _globals(request))


@access(ADMIN)
async def get_global_parameter(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    found = [g for g in _globals(request) if g["name"] == name]
    if not found:
        raise not_found()
    return json_response(request, found[0])


@access(ADMIN)
async def put_global_parameter(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in mc.GLOBAL_PARAMETER_NAMES:
        raise bad_request(f"global parameter '{name}' is not one Warren keeps ({', '.join(mc.GLOBAL_PARAMETER_NAMES)})")
    value = (await read_body(request)).get("value")
    if not isinstance(value, str) or not value:
        raise bad_request("'value' must be a non-empty string")
    created = name not in api_of(request).node.projections.global_parameters
    await api_of(request).node.metadata.run(mc.SetGlobalParameter(new_key(), name, value))
    return created_or_updated(created)


@access(ADMIN)
async def delete_global_parameter(request: web.Request) -> web.Response:
    raise bad_request("Warren's global parameters (cluster_name, internal_cluster_id) are set, not cleared")


_P = "/api/parameters/{component}/{vhost}/{name}"
ROUTES = [
    ("GET", "/api/parameters", list_parameters),
    ("GET", "/api/parameters/{component}", list_parameters),
    ("GET", "/api/parameters/{component}/{vhost}", list_parameters),
    ("GET", _P, get_parameter),
    ("PUT", _P, put_parameter),
    ("DELETE", _P, delete_parameter),
    ("GET", "/api/global-parameters", list_global_parameters),
    ("GET", "/api/global-parameters/{name}", get_global_parameter),
    ("PUT", "/api/global-parameters/{name}", put_global_parameter),
    ("DELETE", "/api/global-parameters/{name}", delete_global_parameter),
]
