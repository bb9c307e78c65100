"""The users' side of a node's (or a worker's) logins, built from its settings:
the Authenticator the metadata keeps in step and the LoginService that runs
password checks off the loop, bounded (node/client/login.py)."""

from __future__ import annotations

from node.client.auth_attempts import AuthAttempts
from node.client.login import FailureDelays, LoginService
from node.client.tokens import verifier_from_config
from node.config import Config
from routing.users import HASHING_ALGORITHMS, Authenticator

__all__ = ["authentication"]


def authentication(config: Config) -> tuple[Authenticator, LoginService]:
    """Raises ValueError for a password hashing module Warren does not know."""
    auth = Authenticator(config.anonymous_user, config.loopback_users, config.login_cache_size)
    if config.password_hashing_module not in HASHING_ALGORITHMS:
        raise ValueError(f"password_hashing_module must be one of {', '.join(HASHING_ALGORITHMS)}, "
                         f"not {config.password_hashing_module!r}")  # fmt: skip
    auth.password_hashing = config.password_hashing_module
    logins = LoginService(auth, config.login_workers, config.login_max_pending,
                          FailureDelays(config.login_failure_delay, config.login_failure_delay_max,
                                        config.login_failure_addresses),
                          AuthAttempts(config.track_auth_attempt_source))  # fmt: skip
    auth.tokens = verifier_from_config(config)  # OAuth 2 (node/client/tokens.py); None unless enabled
    return auth, logins
