"""A fake PDS behind the transport seam: just enough of Bluesky's XRPC for the adapter, the vault
and the publishers (sessions, notifications, records under a fixed key, blobs), with failures
queued per method. Serve it as ``httpx.Client(transport=httpx.MockTransport(FakePDS()))``."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import httpx

PDS = "https://pds.test"
DID = "did:plc:skybot"
HANDLE = "skybot.test"
PASSWORD = "abcd-efgh-ijkl-mnop"
NOW_S = 1_800_000_000


def jwt(exp_s: int, kind: str) -> str:
    payload = base64.urlsafe_b64encode(json.dumps({"exp": exp_s, "sub": DID, "scope": kind}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJIUzI1NiJ9.{payload}.c2ln"


def xrpc_error(status: int, name: str, message: str = "", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": name, "message": message}, headers=headers)


POST = "app.bsky.feed.post"


def iso(seconds: int) -> str:
    """Epoch seconds as the AppView writes times."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def post_view(uri: str) -> dict:
    """A post as ``app.bsky.feed.getPosts`` answers it."""
    return {"uri": uri, "cid": "bafycid", "author": {"did": "did:plc:alice", "handle": "alice.test"},
            "record": {"$type": POST, "text": "hi", "createdAt": iso(NOW_S)}, "indexedAt": iso(NOW_S), "viewer": {"threadMuted": False}}


class FakePDS:
    """Just enough of a PDS: accounts, sessions, records, blobs, notifications; ``fail`` queues
    answers (or exceptions) for a method before it is served normally."""

    def __init__(self) -> None:
        self.generation = 0
        self.access, self.refresh = self._tokens()
        self.records: dict[tuple[str, str], dict] = {}
        self.blobs: list[tuple[str, bytes]] = []
        self.pages: list[list[dict]] = []
        self.seen: list[str] = []
        self.handles = {HANDLE: DID, "ana.test": "did:plc:ana"}
        self.calls: list[str] = []
        self.requests: list[httpx.Request] = []
        self.fail: dict[str, list] = {}

    def _tokens(self) -> tuple[str, str]:
        self.generation += 1
        return jwt(NOW_S + 7200 + self.generation, "com.atproto.appPass"), jwt(NOW_S + 86400 * 60 + self.generation, "com.atproto.refresh")

    def session(self) -> dict[str, str]:
        return {"accessJwt": self.access, "refreshJwt": self.refresh, "did": DID, "handle": HANDLE}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        nsid = request.url.path.removeprefix("/xrpc/")
        self.calls.append(nsid)
        self.requests.append(request)
        queued = self.fail.get(nsid)
        if queued:
            answer = queued.pop(0)
            if callable(answer):
                answer = answer(request, self)
            if isinstance(answer, Exception):
                raise answer
            if answer is not None:
                return answer
        return getattr(self, nsid.replace(".", "_"))(request)

    def _authed(self, request: httpx.Request) -> httpx.Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.access}":
            return xrpc_error(400, "ExpiredToken", "Token has expired")
        return None

    # com.atproto.server
    def com_atproto_server_createSession(self, request):
        body = json.loads(request.content)
        if self.handles.get(body["identifier"]) != DID or body["password"] != PASSWORD:
            return xrpc_error(401, "AuthenticationRequired", "Invalid identifier or password")
        self.access, self.refresh = self._tokens()
        return httpx.Response(200, json={**self.session(), "active": True})

    def com_atproto_server_refreshSession(self, request):
        if request.headers.get("Authorization") != f"Bearer {self.refresh}":
            return xrpc_error(400, "ExpiredToken", "Token has been revoked")
        self.access, self.refresh = self._tokens()
        return httpx.Response(200, json={**self.session(), "active": True})

    # com.atproto.repo
    def com_atproto_repo_getRecord(self, request):
        p = request.url.params
        found = self.records.get((p["collection"], p["rkey"]))
        if found is None or p["repo"] != DID:
            return xrpc_error(400, "RecordNotFound", f"Could not locate record: at://{p['repo']}/{p['collection']}/{p['rkey']}")
        return httpx.Response(200, json=found)

    def com_atproto_repo_createRecord(self, request):
        if refused := self._authed(request):
            return refused
        body = json.loads(request.content)
        key = (body["collection"], body["rkey"])
        if key in self.records:
            return xrpc_error(400, "InvalidRequest", "Record already exists")
        uri = f"at://{body['repo']}/{body['collection']}/{body['rkey']}"
        self.records[key] = {"uri": uri, "cid": f"bafyrei{len(self.records)}", "value": body["record"]}
        return httpx.Response(200, json={"uri": uri, "cid": self.records[key]["cid"]})

    def com_atproto_repo_uploadBlob(self, request):
        if refused := self._authed(request):
            return refused
        self.blobs.append((request.headers["Content-Type"], request.content))
        return httpx.Response(200, json={"blob": {"$type": "blob", "ref": {"$link": f"bafkrei{len(self.blobs)}"},
                                                  "mimeType": request.headers["Content-Type"], "size": len(request.content)}})

    def com_atproto_identity_resolveHandle(self, request):
        did = self.handles.get(request.url.params["handle"])
        return httpx.Response(200, json={"did": did}) if did else xrpc_error(400, "InvalidRequest", "Unable to resolve handle")

    # app.bsky
    def app_bsky_notification_listNotifications(self, request):
        if refused := self._authed(request):
            return refused
        index = int(request.url.params.get("cursor", "0"))
        body: dict = {"notifications": self.pages[index] if index < len(self.pages) else []}
        if index + 1 < len(self.pages):
            body["cursor"] = str(index + 1)
        return httpx.Response(200, json=body)

    def app_bsky_notification_updateSeen(self, request):
        if refused := self._authed(request):
            return refused
        self.seen.append(json.loads(request.content)["seenAt"])
        return httpx.Response(200)

    def app_bsky_feed_getPosts(self, request):
        uris = request.url.params.get_list("uris")
        return httpx.Response(200, json={"posts": [post_view(u) for u in uris if "deleted" not in u]})


__all__ = ["DID", "HANDLE", "NOW_S", "PASSWORD", "PDS", "FakePDS", "iso", "jwt", "post_view", "xrpc_error"]
