"""Several replicas from one import: ``python -m tests.support.replica_fork`` imports the service once, then
forks one child per settings of ``CAPTIONS_TEST_REPLICAS`` (a JSON list of ``Settings`` JSON), each serving
as ``tests.support.server_process`` does (``DrainingServer``, ``server_config``, the fake decoder).

Importing the service costs about 12 s of CPU (NeMo, torch); three replicas started side by side on two
cores took 62 s to be ready, forked from one import they take one import. Each child is a process of its
own: kill -9 and SIGTERM reach it alone. The parent prints ``{"pids": [...]}`` once every child is forked,
reaps them, and exits when they have all exited.
"""

from __future__ import annotations

import json
import os
import signal
import sys

REPLICAS_ENV = "CAPTIONS_TEST_REPLICAS"


def main() -> None:
    import backend.app  # noqa: F401 - imported once, before the fork
    import tests.support.busy_engine  # noqa: F401
    from tests.support import server_process

    pids = []
    for settings_json in json.loads(os.environ[REPLICAS_ENV]):
        pid = os.fork()
        if pid == 0:
            os.environ[server_process.SETTINGS_ENV] = settings_json
            try:
                server_process._serve()
            finally:
                os._exit(0)
        pids.append(pid)
    print(json.dumps({"pids": pids}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: [_kill(pid) for pid in pids])
    for _ in pids:
        os.wait()
    sys.exit(0)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    main()
