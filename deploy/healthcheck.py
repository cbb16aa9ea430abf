"""Docker HEALTHCHECK: exit 0 when this container's ``/readyz`` answers 2xx in time, else 1.

Ready means: model warm, database reachable, not draining, capacity left. A replica that is full or draining
is therefore reported unhealthy on purpose; nothing here restarts it (see docs/deploy.md).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 4.0


def readyz_url() -> str:
    """The readiness URL of the server in this container (``CAPTIONS_PORT``, default 8000)."""
    return f"http://127.0.0.1:{os.environ.get('CAPTIONS_PORT', '8000')}/readyz"


def check(url: str, timeout_s: float = TIMEOUT_S) -> int:
    """0 if ``url`` answers 2xx within ``timeout_s`` seconds, 1 otherwise (the reason goes to stderr)."""
    # An HTTP(S)_PROXY set for model downloads must not capture this local request.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout_s) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.close()
        print(f"{url}: HTTP {exc.code}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1
    return 0 if 200 <= status < 300 else 1


if __name__ == "__main__":
    sys.exit(check(sys.argv[1] if len(sys.argv) > 1 else readyz_url()))
