"""Logging in to the web console (node/http/console/app.js) in headless
Chromium: the API's users with a management tag get in, a user without one is
refused with a message, an OAuth 2 token works as a Bearer (pasted or in the
URL fragment), and a session the API no longer accepts returns to the login
page."""

from __future__ import annotations

import pytest
from jwt_tokens import Issuer
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

MANAGEMENT = ["rabbitmq.tag:management", "rabbitmq.configure:%2F/*", "rabbitmq.write:%2F/*", "rabbitmq.read:%2F/*"]


def test_guest_logs_in_and_sees_the_overview(console, node):
    page = console.page
    expect(console.test_id("who")).to_have_text("guest (administrator)")
    expect(console.test_id("totals").locator('[data-total="exchanges"] b')).to_have_text("6")
    expect(console.test_id("listeners")).to_contain_text(str(node.broker.amqp_port))
    expect(console.test_id("nodes")).to_contain_text("warren@test")
    expect(page.locator('[data-test="rates-chart"] svg')).to_be_visible()
    expect(page.locator('[data-test="rates-chart"] li[data-series]')).to_have_count(6)
    # the session is the tab's: a reload stays logged in
    page.reload()
    expect(page.locator('[data-page="overview"] h1')).to_have_text("Overview")


def test_a_user_without_tags_is_refused_with_a_message(open_console, node):
    node.add_user("plain", "secret")
    console = open_console(login=False)
    page = console.page
    page.get_by_label("Username").fill("plain")
    page.get_by_label("Password").fill("secret")
    page.get_by_label("Password").press("Enter")  # the keyboard submits the form
    expect(console.test_id("login-message")).to_contain_text("none of the tags administrator, monitoring")
    expect(page.locator("#top")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('warren.session')") is None


def test_a_wrong_password_is_a_failed_login(open_console):
    console = open_console("guest", "wrong", login=False)
    console.page.get_by_label("Username").fill("guest")
    console.page.get_by_label("Password").fill("wrong")
    console.page.get_by_role("button", name="Log in", exact=True).click()
    expect(console.test_id("login-message")).to_have_text("Login failed: wrong user name, password or token.")


def test_a_management_user_sees_no_nodes_but_the_rest(open_console, node):
    node.add_user("viewer", "pw", ("management",))
    node.set_permissions("viewer", "/")
    console = open_console("viewer", "pw")
    expect(console.test_id("who")).to_have_text("viewer (management)")
    expect(console.page.get_by_text("The nodes are shown to administrator and monitoring users.")).to_be_visible()


def test_a_session_the_api_no_longer_accepts_returns_to_login(open_console, node, api):
    node.add_user("ops", "before", ("monitoring",))
    console = open_console("ops", "before")
    # the password changes under the session: the next refresh is a failed login
    assert api.put("/api/users/ops", {"password": "after", "tags": "monitoring"}).status == 204
    expect(console.test_id("login-message")).to_have_text("Your session has expired: log in again.")
    assert console.page.evaluate("sessionStorage.getItem('warren.session')") is None
    # logging in again lands on the page that was open
    console.go("#/queues")
    console.page.get_by_label("Username").fill("ops")
    console.page.get_by_label("Password").fill("after")
    console.page.get_by_role("button", name="Log in", exact=True).click()
    expect(console.page.locator('[data-page="queues"] h1')).to_have_text("Queues and streams")


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def oauth_node(broker_factory, issuer):
    return broker_factory(http_port=0, **issuer.settings())


def test_an_oauth_token_logs_in_as_a_bearer(chromium, oauth_node, issuer):
    url = f"http://127.0.0.1:{oauth_node.broker.http_port}/"
    context = chromium.new_context()
    try:
        page = context.new_page()
        seen = []
        page.on("request", lambda r: seen.append(r.headers.get("authorization", "")) if "/api/" in r.url else None)
        page.goto(url)
        page.get_by_label("Access token (JWT)").fill(issuer.token(MANAGEMENT, sub="ops"))
        page.get_by_role("button", name="Log in with token").click()
        expect(page.locator('[data-test="who"]')).to_have_text("ops (management)")
        assert seen and all(h.startswith("Bearer ") for h in seen)
        # an expired token is refused at the login
        page.get_by_role("button", name="Log out").click()
        page.get_by_label("Access token (JWT)").fill(issuer.token(MANAGEMENT, expires_in=-5))
        page.get_by_role("button", name="Log in with token").click()
        expect(page.locator('[data-test="login-message"]')).to_contain_text("Login failed")
        # a token in the URL fragment, as an authorisation server redirects back with
        page.goto(url + "#access_token=" + issuer.token(MANAGEMENT, sub="from-fragment"))
        expect(page.locator('[data-test="who"]')).to_have_text("from-fragment (management)")
        assert "access_token" not in page.url  # dropped from the address bar and history
    finally:
        context.close()


def test_unknown_pages_and_malformed_routes_are_said_so(console):
    for route in ("#/no-such-page", "#/toString", "#/constructor/x"):
        console.go(route)
        expect(console.page.locator("main h1")).to_have_text("Not found")
    console.go("#/queue/%2F/%E0%A4%A")  # a malformed escape: the name as typed, which no queue has
    expect(console.test_id("page-error")).to_contain_text("Not found")
    console.go("#/overview")
    expect(console.page.locator('[data-page="overview"] h1')).to_have_text("Overview")


def test_the_console_over_https(chromium, broker_factory, own_certs):
    """The HTTPS management port serves the same console, and its API calls go over TLS too."""
    node = broker_factory(**own_certs.server_settings("peer"))
    context = chromium.new_context(ignore_https_errors=True)  # the test CA is not the browser's
    try:
        page = context.new_page()
        api_urls = []
        page.on("request", lambda r: api_urls.append(r.url) if "/api/" in r.url else None)
        page.goto(f"https://localhost:{node.broker.https_port}/")
        page.get_by_label("Username").fill("guest")
        page.get_by_label("Password").fill("guest")
        page.get_by_role("button", name="Log in", exact=True).click()
        expect(page.locator('[data-page="overview"] h1')).to_have_text("Overview")
        expect(page.locator('[data-test="listeners"]')).to_contain_text("https")
        assert api_urls and all(u.startswith(f"https://localhost:{node.broker.https_port}/api/") for u in api_urls)
    finally:
        context.close()
