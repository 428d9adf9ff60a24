"""The credentials page of the console (``VAULT.pages``): every credential's metadata, NEEDS
RE-AUTH first, the credentials something wants and the vault lacks listed as missing
(``vault.wanted``), and a write-only paste form. The secret goes to ``Vault.put`` as the
signed-in person and never comes back: not to the page, a log or a response.

``/console/credentials?platform=bluesky&account=shop.bsky.social`` opens the paste form filled in
with that platform and account, the secret field focused: where every page links the fix of a
hold (``vault.hold.paste_url``, ``templates/_fix.html``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import LedgerError, Pages

from .credentials import PLATFORMS, Vault, credential_id
from .errors import VaultError
from .keys import KeyLoader
from .wanted import missing


def credential_pages(pages: Pages) -> list[Route]:
    """The credentials page's routes."""
    key = KeyLoader(pages.settings.section("vault").key_file)

    async def view(request: Request, session: Any, form: dict[str, Any], errors: dict[str, list[str]], status_code: int = 200,
                   focus: bool = False) -> Response:
        def read() -> tuple[list[dict[str, Any]], list[Any]]:
            creds = Vault(pages.ledger(session.actor), key).list()
            return creds, missing(pages.store, pages.settings, pages.machine_for, [c["id"] for c in creds])

        creds, absent = await pages.run(read)
        creds.sort(key=lambda c: (not (c.get("needsReauth") or c.get("status") == "needs-reauth"), c["id"]))
        return pages.render("credentials.html", request, session, title="Credentials", creds=creds, missing=absent,  # type: ignore[no-any-return]
                            form=form, errors=errors, focus=focus, cred_platforms=list(PLATFORMS), key_problem=key.available(),
                            status_code=status_code)

    @pages.page
    async def credentials_page(request: Request) -> Response:
        """Credentials and the paste form; ``?platform=...&account=...`` fills the form in and focuses its secret field."""
        session = await pages.session(request)
        platform, account = request.query_params.get("platform", ""), request.query_params.get("account", "")
        try:
            asked = bool(credential_id(platform, account))
        except VaultError:  # not a platform, not an account: the empty form, as without them
            asked = False
        form = {"platform": platform if asked else "instagram", "account": account if asked else "", "verify": False}
        return await view(request, session, form, {}, focus=asked)

    @pages.page
    async def credentials_paste(request: Request) -> Response:
        """Store a new secret through ``Vault.put`` as the signed-in person; it is never shown again."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        platform, account = fields.get("platform", ""), fields.get("account", "").strip()
        secret = fields.pop("secret", "")
        form = {"platform": platform, "account": account, "verify": bool(fields.get("verify"))}  # never the secret
        errors: dict[str, list[str]] = {}
        if platform not in PLATFORMS:
            errors["cred-platform"] = [f"platform must be one of {', '.join(PLATFORMS)}"]
        if not account:
            errors["cred-account"] = ["give the account this secret is for"]
        if not secret.strip():
            errors["secret"] = ["paste the secret"]
        problem = key.available()
        if problem and not errors:
            errors["secret"] = [f"the hub has no vault master key, so it cannot seal this secret: {problem}"]
        if errors:
            return await view(request, session, form, errors, 422)

        def store_it() -> dict[str, Any]:
            meta = Vault(pages.ledger(session.actor), key).put(platform, account, secret)
            if form["verify"]:
                from .rotation import verify

                meta = verify(pages.context("vault", "tick:vault"), meta["id"])
            return meta

        try:
            meta = await pages.run(store_it)
        except VaultError as exc:
            where = "cred-account" if "account" in exc.reason.split(" ", 2)[:2] else "secret"
            return await view(request, session, form, {where: [exc.reason]}, 422)
        except LedgerError as exc:
            return await view(request, session, form, {"secret": [exc.reason]}, exc.status)
        finally:
            secret = ""
        return pages.done("/console/credentials", f"{meta['id']}: version {meta.get('version')} stored ({meta.get('status')})")  # type: ignore[no-any-return]

    return [Route("/console/credentials", credentials_page, methods=["GET"]),
            Route("/console/credentials", credentials_paste, methods=["POST"])]


__all__ = ["credential_pages"]
