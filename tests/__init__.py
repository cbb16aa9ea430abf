"""The test suite (``make test``): in-process app tests, a real uvicorn for protocol behaviour, real Chromium
for the pages (``tests/browser``), real PostgreSQL (``postgres`` marker); ``tests/support`` holds the
fixtures' builders (servers, a fake engine for web-layer logic, a tiny random NeMo model, speech)."""
