"""The service's edge: what every request and socket passes before any domain code.

HTTP limits as plain ASGI middleware (``http_limits``: requests at once, body caps per route, the no-login
routes per address), the sliding window they share (``ratelimit``), bounded JSON (``jsonlimits``) and how a
socket's text frame is read (``websocket``), passwords, cookies, CSRF and tokens (``security``), speaker
tickets (``tickets``), typed API errors (``errors``), structured logs (``logs``) and metrics (``metrics``).

Imports ``db`` (tickets are rows) and ``config`` only; never ``api`` or any domain package.
"""
