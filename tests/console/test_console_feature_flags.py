"""Enabling a feature flag from the console's Admin page (node/http/console/
admin/feature_flags.js). A brand-new cluster enables every stable flag, so
the node here first starts with the test knob WARREN_TEST_UNSUPPORTED_FLAGS
saying it lacks one (as a cluster built before the flag existed), then
restarts without it: the flag is supported and off, as after an upgrade."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from metadata.feature_flags import EXCHANGE_POLICIES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def node(broker_factory, tmp_path, monkeypatch):
    """This module's node (open_console's): upgraded, with EXCHANGE_POLICIES still off."""
    monkeypatch.setenv("WARREN_TEST_UNSUPPORTED_FLAGS", EXCHANGE_POLICIES)
    broker_factory(data_dir=tmp_path / "n", http_port=0, metrics_port=0, enable_test_faults=True).stop()
    monkeypatch.delenv("WARREN_TEST_UNSUPPORTED_FLAGS")
    return broker_factory(data_dir=tmp_path / "n", http_port=0, metrics_port=0)


def test_enable_a_disabled_feature_flag_from_the_page(console, api):
    flags = {f["name"]: f["state"] for f in api.get("/api/feature_flags").body}
    assert flags[EXCHANGE_POLICIES] == "disabled" and list(flags.values()).count("disabled") == 1
    # what the flag guards is refused while it is off
    policy = {"pattern": "^orders$", "apply-to": "exchanges", "definition": {"alternate-exchange": "ae"}}
    assert api.put("/api/policies/%2F/ae", policy).status == 400

    console.go("#/admin/feature-flags")
    row = console.test_id(f"feature-flag-{EXCHANGE_POLICIES}")
    expect(row.locator('[data-test="feature-flag-state"]')).to_have_text("disabled")
    # every flag the API lists is on the page, with its state, and only the disabled one has a button
    for name, state in flags.items():
        expect(console.test_id(f"feature-flag-{name}").locator('[data-test="feature-flag-state"]')).to_have_text(state)
    expect(console.test_id("feature-flag-enable")).to_have_count(1)

    row.locator('[data-test="feature-flag-enable"]').click()
    expect(row.locator('[data-test="feature-flag-state"]')).to_have_text("enabled")
    expect(console.test_id("feature-flag-enable")).to_have_count(0)
    assert {f["name"]: f["state"] for f in api.get("/api/feature_flags").body}[EXCHANGE_POLICIES] == "enabled"
    assert api.put("/api/policies/%2F/ae", policy).status == 201
