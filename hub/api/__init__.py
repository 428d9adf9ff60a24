"""The HTTP API: the store over the network, with the same rules as a local write. One router
per topic, each made from the few things it needs (never the whole hub):

    health.py      GET /health                          (the health probe, the streams' numbers)
    whoami.py      GET /v1/whoami                       (nothing: the principal the gate found)
    documents.py   /v1/db/{db}/docs, query, history     (the store, the databases products keep private)
    changes.py     /v1/changes, /v1/head, the stream    (the store, the stream's fan-out, what a change may show)
    machines.py    GET /v1/machines                     (the rules)
    web.py         what a product's routes are handed   (ledger.Web)
    errors.py, parsing.py, deps.py   the error bodies, strict parsing, the shared parameters

``hub/webapp.py`` composes them with the products' routers, the gate and the console.

Every endpoint but ``/health`` and the OpenAPI description needs a credential (an operator
token or a signed device request). The gate (``hub/gate.py``) checks it from the headers
before it reads a byte of the body, and bounds the body (1 MiB and a little, however framed)
and the time it may take; the authenticated actor is the actor of the write, and the machines
decide what it may do: the API adds no second rulebook.

Errors are ``{"error": code, "reason": sentence}``:

- 400 ``invalid``: the request is readable but its values are refused: a path that is not
  UTF-8 after percent-decoding, a ``key_json`` that is not strict JSON (NaN, Infinity, an
  integer beyond 64 bits, a lone surrogate), a ``Last-Event-ID`` that is not a sequence
  number, a document the store refuses (a reserved field, a bad id).
- 422 ``invalid``: the body or a parameter cannot be read as the endpoint declares it: a
  body that is not UTF-8, not JSON or not a JSON object; a parameter of the wrong type.
- 401 ``unauthorized``, 403 ``forbidden``, 404 ``not_found``, 408 ``timeout`` (the body did
  not arrive in time), 409 ``conflict``, 413 ``too_large``, 503 ``backend`` (and ``/health``
  when something is down).

A junk ``Last-Event-ID`` is refused (400) rather than ignored: the stream only ever sends
sequence numbers as ids, so anything else is a client's bug, better seen than papered over.
"""
