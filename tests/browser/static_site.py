"""Serve ``frontend/`` to a Playwright page from disk through request routing, at any origin.

Used by the fast tests that need the modules but not the service (ES modules cannot load from file://).
An origin that is not localhost is also how the tests get an insecure (http) context.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import Any

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
PAGES = {"/": "index.html", "/dictation": "dictation.html", "/admin": "admin.html"}
BLANK = "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>test</title></head></html>"


def serve_frontend(page: Any, origin: str, api: dict[str, Any] | None = None) -> None:
    """Route ``origin``: pages and /static/ from disk, ``/blank`` as an empty page, and each
    ``api[path]`` (a JSON-able body, or a callable(route) -> None) for /api/ requests (others 404)."""
    api = api or {}

    def handle(route: Any) -> None:
        path = route.request.url[len(origin) :].split("?", 1)[0] or "/"
        if path in api:
            answer = api[path]
            if callable(answer):
                answer(route)
            else:
                route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))
            return
        if path == "/blank":
            route.fulfill(status=200, content_type="text/html", body=BLANK)
            return
        if path in PAGES:
            file = FRONTEND / PAGES[path]
        elif path.startswith("/static/"):
            file = (FRONTEND / path.lstrip("/")).resolve()
            if FRONTEND not in file.parents:
                route.fulfill(status=403, body="outside frontend/")
                return
        else:
            file = None
        if file is None or not file.is_file():
            body = json.dumps({"error": {"code": "not_found", "message": f"{path} not found"}})
            route.fulfill(status=404, content_type="application/json", body=body)
            return
        content_type = "text/javascript" if file.suffix == ".js" else mimetypes.guess_type(file.name)[0]
        route.fulfill(
            status=200, content_type=content_type or "application/octet-stream", body=file.read_bytes()
        )

    page.route(f"{origin}/**", handle)


def unauthorized(route: Any) -> None:
    """An /api/auth/me answer for a visitor with no session."""
    body = json.dumps({"error": {"code": "unauthenticated", "message": "log in first"}})
    route.fulfill(status=401, content_type="application/json", body=body)
