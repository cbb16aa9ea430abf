"""One real server with the bundled model for the compatibility tests, and an API token of its admin."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.support.server import LiveServer, login, make_settings
from tests.support.speech import spoken

TERM = "Kowalczyk"
"""Boosted, the bundled model hears it; plain, it hears "Kawalik" (espeak-ng 1.51, checked by a test)."""
SENTENCE = "Please send the report to doctor Kowalczyk before noon."
OTHER_TERM = "tocilizumab"


@pytest.fixture(scope="package")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """uvicorn with the real engine (bundled model, second pass); small caps so limits are cheap to hit."""
    tmp = tmp_path_factory.mktemp("compat")
    settings = make_settings(tmp, max_recording_bytes=400_000, max_recording_s=30.0, max_terms_per_session=5)
    with LiveServer(settings) as live:
        yield live


@pytest.fixture(scope="package")
def api_token(real_server: LiveServer) -> str:
    admin = login(real_server.base_url)
    created = admin.post("/api/tokens", json={"name": "compat"})
    assert created.status_code == 201, created.text
    return created.json()["token"]


@pytest.fixture(scope="package")
def speech(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    return spoken(SENTENCE, tmp_path_factory.mktemp("speech"))
