"""The tiny random model every train test loads, built once per session (read-only use)."""

from __future__ import annotations

import pytest

from tests.train.helpers import make_tiny_model


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny"))
