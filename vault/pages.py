"""The credentials page of the console (``VAULT.pages``): every credential's metadata, NEEDS
RE-AUTH first, and a write-only paste form. The secret goes to ``Vault.put`` as the signed-in
person and never comes back: not to the page, a log or a response."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import LedgerError, Pages

from .credentials import PLATFORMS, Vault
from .errors import VaultError
from .keys import KeyLoader


def credential_pages(pages: Pages) -> list[Route]:
    """The credentials page's routes."""
    key = KeyLoader(pages.settings.section("vault").key_file)

    async def view(request: Request, session: Any, form: dict[str, Any], errors: dict[str, list[str]], status_code: int = 200) -> Response:
        creds = await pages.run(lambda: Vault(pages.ledger(session.actor), key).list())
        creds.sort(key=lambda c: (not (c.get("needsReauth") or c.get("status") == "needs-reauth"), c["id"]))
        return pages.render("credentials.html", request, session, title="Credentials", creds=creds, form=form, errors=errors,  # type: ignore[no-any-return]
                            cred_platforms=list(PLATFORMS), key_problem=key.available(), status_code=status_code)

    @pages.page
    async def credentials_page(request: Request) -> Response:
        """Credentials and the paste form."""
        session = await pages.session(request)
        return await view(request, session, {"platform": "instagram", "account": "", "verify": False}, {})

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
