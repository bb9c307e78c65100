"""The pure side of node/client/tls.py: a certificate subject as the user
name SASL EXTERNAL logs in as, and TLS settings refused at start."""

from __future__ import annotations

import pytest

from node.client.tls import TlsContexts, TlsError, common_name, distinguished_name, login_name
from node.config import Config

SUBJECT = {"subject": ((("countryName", "GB"),), (("organizationName", "Acme, Inc."),),
                       (("organizationalUnitName", "ops"), ("domainComponent", "eu")),
                       (("commonName", " app#1 "),))}  # fmt: skip


def test_distinguished_name_is_rfc4514_most_specific_first_with_escapes():
    assert distinguished_name(SUBJECT) == "CN=\\ app#1\\ ,OU=ops+DC=eu,O=Acme\\, Inc.,C=GB"


def test_login_name_by_setting():
    assert login_name(SUBJECT, "common_name") == common_name(SUBJECT) == " app#1 "
    assert login_name(SUBJECT, "distinguished_name") == distinguished_name(SUBJECT)
    assert login_name(None, "distinguished_name") is None
    assert login_name({}, "common_name") is None  # a certificate that was not verified


@pytest.mark.parametrize("settings, message", [
    ({"tls_cert": "x.pem"}, "tls_key"),
    ({"tls_cert": "x.pem", "tls_key": "x.key", "ssl_cert_login_from": "email"}, "ssl_cert_login_from"),
    ({"tls_cert": "x.pem", "tls_key": "x.key", "tls_verify": "always"}, "tls_verify"),
    ({"tls_cert": "x.pem", "tls_key": "x.key", "tls_verify": "require"}, "tls_ca"),
    ({"tls_cert": "missing.pem", "tls_key": "missing.key"}, "cannot load"),
])  # fmt: skip
def test_unusable_settings_are_refused(settings, message):
    with pytest.raises(TlsError, match=message):
        TlsContexts.from_config(Config(**settings))


def test_no_tls_without_a_certificate():
    assert TlsContexts.from_config(Config()) is None
