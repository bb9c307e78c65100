"""Logging in to the web console (node/http/console/app.js) in headless
Chromium: the API's users with a management tag get in, others are refused
with a message, an OAuth 2 token works as a Bearer, and a session the API no
longer accepts returns to the login page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_guest_logs_in_and_sees_the_overview(console, node):
    page = console.page
    expect(console.test_id("who")).to_have_text("guest (administrator)")
    expect(console.test_id("totals").locator('[data-total="exchanges"] b')).to_have_text("6")
    expect(console.test_id("listeners")).to_contain_text(str(node.broker.amqp_port))
    expect(console.test_id("nodes")).to_contain_text("warren@test")
    expect(page.locator('[data-test="rates-chart"] svg')).to_be_visible()
    expect(page.locator('[data-test="rates-chart"] li[data-series]')).to_have_count(6)
