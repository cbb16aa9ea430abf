"""The read-only meeting view: every stream of a meeting, live, for its viewers.

Owns the fan-out of partials and finals to viewers (``feed``: bounded queues, a slow viewer is dropped,
never waited for; ``viewers``: a viewer's queue and a meeting's channel), its catch-up from SQL
(``catch_up``: the clock, the SQLite poller, revoked links, an ended meeting), the bus between replicas
(``bus``: PostgreSQL LISTEN/NOTIFY, an SQL poller on SQLite), the meeting's clock and speaker names
(``timeline``, also used by the exports), viewer admission (``admission``: tickets and viewer links) and
the ``/ws/view`` socket (``viewer_ws``).

Never imports ``sessions`` (sessions publish into it); imports ``text``, ``edge``, ``db`` and, of the
composition root, ``config`` and ``services`` only.
"""
