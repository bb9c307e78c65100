"""Management API handlers for policies and operator policies, with
RabbitMQ's paths, bodies and rules:

    GET    /api/policies[/{vhost}[/{name}]]            any user who sees the vhost
    PUT    /api/policies/{vhost}/{name}                policymaker or administrator
    DELETE /api/policies/{vhost}/{name}                   with access to the vhost
    ...    /api/operator-policies[/{vhost}[/{name}]]    administrator

A PUT body is {"pattern", "definition", "priority", "apply-to"}; a
definition RabbitMQ would refuse is 400 with the reason
(routing/policies.py). The policies themselves live in the metadata store;
node/vhosts/policies.py applies them to queues.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from metadata import commands as mc
from metadata.feature_flags import EXCHANGE_POLICIES, QUORUM_CONSUMER_TIMEOUT
from node.http import formats as fmt
from node.http.route_kit import (
    ADMIN,
    MGMT,
    USER,
    VHOST,
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
from node.vhosts.metadata_store import new_key
from routing import policies


def _listing(request: web.Request, operator: bool, vhost: str | None = None) -> list[dict]:
    api = api_of(request)
    names = [vhost] if vhost is not None else [v.name for v in api.visible_vhosts(request[USER])]
    projections = api.node.projections
    return [fmt.policy_definition_json(p) for name in names for p in projections.vhost_policies(name, operator)]


def _find(request: web.Request, operator: bool) -> Any:
    api = api_of(request)
    vhost = api.vhost(request.match_info["vhost"]).name
    table = api.node.projections.operator_policies if operator else api.node.projections.policies
    policy = table.get((vhost, request.match_info["name"]))
    if policy is None:
        raise not_found()
    return policy


def parse_policy(body: dict, operator: bool) -> tuple[str, str, dict, int]:
    """(pattern, apply-to, definition, priority) of a PUT body or a
    definitions entry; raises 400 with RabbitMQ's kind of reason."""
    priority = body.get("priority", 0)
    if isinstance(priority, str) and priority.strip().lstrip("-").isdigit():
        priority = int(priority)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise bad_request(f"'priority' must be a non-negative integer, got {priority!r}")
    apply_to = body.get("apply-to", "all")
    try:
        pattern = policies.validate_pattern(body.get("pattern"))
        definition = policies.validate(body.get("definition"), apply_to, operator)
    except policies.PolicyError as e:
        raise bad_request(f"Validation failed\n\n{e}\n") from None  # RabbitMQ's frame of a parameter's refusal
    return pattern, apply_to, definition, priority


async def _put(request: web.Request, operator: bool) -> web.Response:
    api = api_of(request)
    vhost, name = api.vhost(request.match_info["vhost"]).name, request.match_info["name"]
    if not name:
        raise bad_request("a policy needs a name")
    pattern, apply_to, definition, priority = parse_policy(await read_body(request), operator)
    flags = api.node.projections.feature_flags
    if definition.keys() & set(policies.EXCHANGE_KEYS) and EXCHANGE_POLICIES not in flags:
        raise bad_request(f"exchange keys ({', '.join(policies.EXCHANGE_KEYS)}) need the feature flag "
                          f"{EXCHANGE_POLICIES} (warren ctl enable_feature_flag {EXCHANGE_POLICIES})")  # fmt: skip
    if "consumer-timeout" in definition and apply_to != "classic_queues" and QUORUM_CONSUMER_TIMEOUT not in flags:
        raise bad_request(f"consumer-timeout on quorum queues needs the feature flag {QUORUM_CONSUMER_TIMEOUT}"
                          f" (warren ctl enable_feature_flag {QUORUM_CONSUMER_TIMEOUT})")  # fmt: skip
    command = mc.SetOperatorPolicy if operator else mc.SetPolicy
    created = await api.node.metadata.created(command(new_key(), vhost, name, pattern, apply_to, definition,
                                                        priority))  # fmt: skip
    return created_or_updated(created)


async def _delete(request: web.Request, operator: bool) -> web.Response:
    policy = _find(request, operator)
    command = mc.ClearOperatorPolicy if operator else mc.ClearPolicy
    await api_of(request).node.metadata.run(command(new_key(), policy.vhost, policy.name))
    return no_content()


# ---------------------------------------------------------------- policies


@access(MGMT)
async def list_policies(request: web.Request) -> web.Response:
    return json_response(request, _listing(request, False))


@access(VHOST)
async def vhost_policies(request: web.Request) -> web.Response:
    vhost = api_of(request).vhost(request.match_info["vhost"]).name
    return json_response(request, _listing(request, False, vhost))


@access(VHOST)
async def get_policy(request: web.Request) -> web.Response:
    return json_response(request, fmt.policy_definition_json(_find(request, False)))


@access(VHOST)
async def put_policy(request: web.Request) -> web.Response:
    check_policymaker(request)
    return await _put(request, False)


@access(VHOST)
async def delete_policy(request: web.Request) -> web.Response:
    check_policymaker(request)
    return await _delete(request, False)


# ---------------------------------------------------------------- operator policies


@access(ADMIN)
async def list_operator_policies(request: web.Request) -> web.Response:
    return json_response(request, _listing(request, True))


@access(ADMIN)
async def vhost_operator_policies(request: web.Request) -> web.Response:
    vhost = api_of(request).vhost(request.match_info["vhost"]).name
    return json_response(request, _listing(request, True, vhost))


@access(ADMIN)
async def get_operator_policy(request: web.Request) -> web.Response:
    return json_response(request, fmt.policy_definition_json(_find(request, True)))


@access(ADMIN)
async def put_operator_policy(request: web.Request) -> web.Response:
    return await _put(request, True)


@access(ADMIN)
async def delete_operator_policy(request: web.Request) -> web.Response:
    return await _delete(request, True)


ROUTES = [
    ("GET", "/api/policies", list_policies),
    ("GET", "/api/policies/{vhost}", vhost_policies),
    ("GET", "/api/policies/{vhost}/{name}", get_policy),
    ("PUT", "/api/policies/{vhost}/{name}", put_policy),
    ("DELETE", "/api/policies/{vhost}/{name}", delete_policy),
    ("GET", "/api/operator-policies", list_operator_policies),
    ("GET", "/api/operator-policies/{vhost}", vhost_operator_policies),
    ("GET", "/api/operator-policies/{vhost}/{name}", get_operator_policy),
    ("PUT", "/api/operator-policies/{vhost}/{name}", put_operator_policy),
    ("DELETE", "/api/operator-policies/{vhost}/{name}", delete_operator_policy),
]
