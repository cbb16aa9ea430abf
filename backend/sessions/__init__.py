"""The caption session: one speaker's stream from handshake to its last final.

Owns the protocol state machine (``ws``: a reader task, ``reader``, and a consumer task per socket, over
the state in ``core``; ``opening``: a new session or a resume; ``protocol``: its states and what a ``start``
may claim), admission of speakers (``admission``: origin, ticket, caps), the
meetings and sessions live on this replica (``live.LiveHub``), the caption store (numbering,
persist-before-send, replay: ``caption_store``, ``persist``), resumes (``resume``), a session's vocabulary
(``vocabulary``), the end of sockets whose API token is revoked (``token_watch``), dictations left live
(``dictations``) and the degradation ladder (``ladder``).

Imports ``meeting_view`` (the hub owns the meeting feed and publishes to it), ``text``, ``edge``, ``db``,
``engine`` and, of the composition root, ``config`` and ``services`` only.
"""
