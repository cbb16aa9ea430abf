"""Typed API errors rendered as ``{"error": {"code", "message", "errors"?}}``."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from backend.edge import jsonlimits
from backend.edge.logs import get_logger

log = get_logger(__name__)


class ApiError(Exception):
    """An error a client can act on: HTTP status, a stable code, a message, optional per-item errors."""

    def __init__(self, status: int, code: str, message: str, errors: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def error_response(exc: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    """``{"error": {"code", "message", "errors"?}}`` with the error's status."""
    body: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.errors is not None:
        body["errors"] = exc.errors
    return JSONResponse({"error": body}, status_code=exc.status, headers=headers)


async def api_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)  # noqa: S101 - registered for ApiError only
    return error_response(exc)


async def http_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)  # noqa: S101 - registered for HTTPException only
    return JSONResponse(
        {"error": {"code": "http_error", "message": exc.detail}},
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or a 400 naming the problem (422 naming the field whose text is not
    valid Unicode). Nesting and integer size are bounded (``backend.edge.jsonlimits``)."""
    try:
        body = jsonlimits.loads(await request.body(), request.app.state.services.settings.max_json_depth)
    except jsonlimits.ClientJsonError as exc:
        if exc.path:
            raise ApiError(422, "invalid", str(exc), [{"field": exc.path, "reason": "unicode"}]) from exc
        raise ApiError(400, "bad_json", f"request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "request body must be a JSON object")
    return body


def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], required: bool = True) -> Any:
    """``body[name]`` checked against ``kind``; 422 with the field path otherwise."""
    if name not in body or body[name] is None:
        if required:
            raise ApiError(422, "invalid", f"{name}: required", [{"field": name, "reason": "required"}])
        return None
    value = body[name]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ApiError(422, "invalid", f"{name}: expected a number", [{"field": name, "reason": "type"}])
    if not isinstance(value, kind):
        raise ApiError(422, "invalid", f"{name}: wrong type", [{"field": name, "reason": "type"}])
    return value


async def engine_unavailable_handler(_request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": {"code": "engine_unavailable", "message": str(exc)}}, status_code=503)


async def storage_unavailable_handler(_request: Request, exc: Exception) -> JSONResponse:
    """The database refused an operation (disk full, locked, connection lost): a typed 503 the client may
    retry, not a 500."""
    log.error("storage_unavailable", error=f"{type(exc).__name__}: {exc}"[:300])
    unavailable = ApiError(
        503, "storage_unavailable", "the server cannot store or read data right now; retry"
    )
    return error_response(unavailable, {"retry-after": "5"})


OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_error",
}
"""OpenAI's error ``type`` for a status (``backend.compat.openai_api``); anything else is ``api_error``."""


def openai_error_response(
    exc: ApiError, param: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An ``ApiError`` in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, which the
    OpenAI client libraries read (the ``/v1/`` routes). ``param`` defaults to the first per-item field."""
    if param is None and exc.errors:
        param = exc.errors[0].get("field")
    body = {
        "message": exc.message,
        "type": OPENAI_TYPES.get(exc.status, "api_error"),
        "param": param,
        "code": exc.code,
    }
    return JSONResponse({"error": body}, status_code=exc.status, headers=headers)
