"""The version the package reports (and sends to brokers in ApiVersions) is the distribution's."""
from __future__ import annotations

import pathlib
import tomllib

import fastkafka
from fastkafka._net.handshake import API_VERSIONS_BODY


def test_version_is_the_distributions():
    pyproject = pathlib.Path(fastkafka.__file__).resolve().parents[1] / "pyproject.toml"
    version = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert fastkafka.__version__ == version
    assert API_VERSIONS_BODY == {"client_software_name": "fastkafka", "client_software_version": version}
