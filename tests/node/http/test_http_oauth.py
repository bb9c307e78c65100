"""OAuth 2 tokens on the management API (node/http/api.py): `Authorization:
Bearer <token>` (or the token as the basic-auth password), its tag scopes as
the user's tags and its permission scopes as its permissions, checked as a
user's; refused tokens are 401 as a failed login. Real JWTs signed here
(tests/support/jwt_tokens.py)."""

from __future__ import annotations

import base64
import json

import pytest
from jwt_tokens import Issuer
from mgmt_client import Api

pytestmark = pytest.mark.timeout(60)

MANAGEMENT = ["rabbitmq.tag:management", "rabbitmq.configure:%2F/app-*", "rabbitmq.write:%2F/app-*",
              "rabbitmq.read:%2F/app-*"]  # fmt: skip


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def oauth_api(broker_factory, issuer) -> Api:
    node = broker_factory(**issuer.settings())
    api = Api(node.broker.http_port)
    assert api.put("/api/vhosts/other").status == 201
    return api


def bearer(token: str) -> dict:
    return {"Authorization": "Bearer " + token}


def as_token(api: Api, method: str, path: str, token: str, body=None):
    return api.request(method, path, body, headers=bearer(token), auth=False)


def test_a_bearer_token_is_a_user_with_its_tags(oauth_api, issuer):
    r = as_token(oauth_api, "GET", "/api/whoami", issuer.token(MANAGEMENT, sub="ops"))
    assert r.status == 200 and r.body == {"name": "ops", "tags": ["management"]}
    admin = issuer.token(["rabbitmq.tag:administrator"], kid="ec")
    assert as_token(oauth_api, "GET", "/api/users", admin).status == 200
    assert as_token(oauth_api, "GET", "/api/users", issuer.token(MANAGEMENT)).status == 401


def test_the_token_as_the_basic_auth_password_works_too(oauth_api, issuer):
    r = oauth_api.as_user("anyone", issuer.token(MANAGEMENT, sub="ops")).get("/api/whoami")
    assert r.status == 200 and r.body["name"] == "ops"


@pytest.mark.parametrize("token_args", [
    {"expires_in": -5}, {"audience": "another-service"}, {"sign_with": "stranger"}, {"kid": "no-such-key"},
], ids=["expired", "wrong-audience", "wrong-key", "unknown-kid"])  # fmt: skip
def test_refused_tokens_are_a_failed_login(oauth_api, issuer, token_args):
    r = as_token(oauth_api, "GET", "/api/whoami", issuer.token(MANAGEMENT, **token_args))
    assert r.status == 401 and r.body == {"error": "not_authorized", "reason": "Login failed"}


def test_a_token_without_a_management_tag_is_refused(oauth_api, issuer):
    r = as_token(oauth_api, "GET", "/api/overview", issuer.token(["rabbitmq.read:*/*"]))
    assert r.status == 401 and r.body["reason"] == "Not management user"


def test_scopes_are_the_permissions_of_http_operations(oauth_api, issuer):
    token = issuer.token(MANAGEMENT)
    assert as_token(oauth_api, "PUT", "/api/queues/%2F/app-q", token, {}).status == 201
    r = as_token(oauth_api, "PUT", "/api/queues/%2F/other-q", token, {})
    assert r.status == 401 and "configure access to queue 'other-q'" in r.body["reason"]
    assert as_token(oauth_api, "PUT", "/api/queues/other/app-q", token, {}).status == 401  # no scope in vhost other
    names = [q["name"] for q in as_token(oauth_api, "GET", "/api/queues", token).body]
    assert names == ["app-q"]
    vhosts = [v["name"] for v in as_token(oauth_api, "GET", "/api/vhosts", token).body]
    assert vhosts == ["/"]
    assert as_token(oauth_api, "DELETE", "/api/queues/%2F/app-q", token).status == 204


def test_bearer_is_refused_when_oauth_is_off(api, issuer):
    r = api.request("GET", "/api/whoami", headers=bearer(issuer.token(MANAGEMENT)), auth=False)
    assert r.status == 401


def test_an_administrator_token_creating_a_vhost_stores_no_permission_for_it(oauth_api, issuer):
    admin = issuer.token(["rabbitmq.tag:administrator"], sub="root")
    assert as_token(oauth_api, "PUT", "/api/vhosts/new", admin).status == 201
    users = {p["user"] for p in oauth_api.get("/api/permissions").body}
    assert "root" not in users


def test_basic_auth_with_a_user_password_still_works(oauth_api):
    token = base64.b64encode(b"guest:guest").decode()
    assert oauth_api.request("GET", "/api/whoami", headers={"Authorization": "Basic " + token},
                             auth=False).status == 200  # fmt: skip


def test_bearer_over_https(broker_factory, certs, issuer):
    node = broker_factory(**certs.server_settings("peer"), **issuer.settings())
    api = Api(node.broker.https_port, tls=certs.client_context(None), host="localhost")
    r = api.request("GET", "/api/whoami", headers=bearer(issuer.token(MANAGEMENT, sub="tls-ops")), auth=False)
    assert r.status == 200 and r.body["name"] == "tls-ops"
    assert api.request("GET", "/api/whoami", headers=bearer(issuer.token(MANAGEMENT, expires_in=-5)),
                       auth=False).status == 401  # fmt: skip


def test_a_bearer_token_naming_a_new_key_reads_the_keys_again(broker_factory, issuer, tmp_path):
    jwks = issuer.jwks_file(tmp_path / "jwks.json")
    node = broker_factory(oauth_enabled=True, oauth_jwks_file=str(jwks))
    api = Api(node.broker.http_port)
    rotated = Issuer()
    jwks.write_text(json.dumps({"keys": [dict(rotated.jwks()["rsa"], kid="rsa-2")]}))  # the old keys retired
    token = rotated.token(MANAGEMENT, kid="rsa-2", sign_with=rotated.rsa_key)
    assert as_token(api, "GET", "/api/whoami", token).status == 200
    assert as_token(api, "GET", "/api/whoami", issuer.token(MANAGEMENT)).status == 401  # no longer trusted
