"""The version of fastkafka-producer: the same as pyproject.toml's (tests/unit/fastkafka/test_version.py)."""

__version__ = "0.2.0"
