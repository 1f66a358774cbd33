"""OIDC fixtures: the project's local identity provider (fastkafka_tools.oidc_idp).

``oidc_idp`` is a module-wide provider (RS256 key, audience "kafka", client "app"); tests that
rotate keys, inject failures or count requests start their own ``IdentityProvider`` (a thread) or
reset what they changed.
"""
from __future__ import annotations

import pytest

OIDC_CLIENTS = {"app": "app-secret-7731", "reader": "reader-secret-1208"}


@pytest.fixture(scope="module")
def oidc_idp():
    from fastkafka_tools.oidc_idp import IdentityProvider

    idp = IdentityProvider(OIDC_CLIENTS, audience="kafka")
    try:
        yield idp
    finally:
        idp.close()
