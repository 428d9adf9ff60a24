"""The vault's HTTP routes (``PRODUCT.api``): write-only credentials over the hub's API.

    PUT    /v1/vault/credentials/{platform}/{account}   seal a secret (body {"secret": ...}); ?verify=true checks it now
    GET    /v1/vault/credentials                        every credential's metadata
    GET    /v1/vault/credentials/{id}                   one credential's metadata
    DELETE /v1/vault/credentials/{id}                   remove one

Nothing here gives a secret back: the answers are metadata (platform, account, status,
fingerprint, ...). The person's token decides who writes; the vault's machine decides what.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query
from fastapi import Path as PathParam
from pydantic import BaseModel, Field, SecretStr

from ledger import Web

from .credentials import Vault, credential_id
from .errors import NoMasterKey
from .keys import ALTERNATIVES, KeyLoader


class SecretIn(BaseModel):
    secret: SecretStr | dict[str, Any] = Field(description="The secret: a string (token, app password) or a JSON object")

    def __repr__(self) -> str:
        return "SecretIn(secret=***)"


class Credential(BaseModel):
    id: str
    platform: str
    account: str
    version: int
    status: str
    createdAt: int | None = None
    refreshedAt: int | None = None
    expiresAt: int | None = None
    verifiedAt: int | None = None
    needsReauth: bool | None = None
    lastError: str | None = None
    fingerprint: str | None = None


class Removed(BaseModel):
    id: str
    rev: str
    deleted: bool = True


def vault_router(web: Web) -> APIRouter:
    """The vault's routes over the hub's store (see the module docstring)."""
    router = APIRouter(tags=["vault"])
    key = KeyLoader(web.settings.section("vault").key_file)

    def vault_for(actor: str) -> Vault:
        return Vault(web.ledger(actor), key)

    @router.put("/v1/vault/credentials/{platform}/{account}", response_model=Credential)
    async def vault_put(
        platform: str = PathParam(description="bluesky, instagram, threads or facebook"),
        account: str = PathParam(description="The account, e.g. ourbot.bsky.social or an Instagram user id"),
        body: SecretIn = Body(...),
        verify: bool = Query(False, description="Check the secret with the platform now instead of at the next vault tick"),
        who: Any = Depends(web.principal),
    ) -> dict[str, Any]:
        def put() -> dict[str, Any]:
            from .rotation import verify as verify_now

            credential_id(platform, account)  # a bad platform or account is the client's mistake, whatever the hub lacks
            if key.available():
                raise NoMasterKey(f"the hub has no vault master key, so it cannot seal this secret: on the hub, {ALTERNATIVES}")
            secret = body.secret.get_secret_value() if isinstance(body.secret, SecretStr) else body.secret
            meta = vault_for(who.actor).put(platform, account, secret)
            if verify:
                meta = verify_now(web.context("vault", "tick:vault"), meta["id"])
            return meta

        result: dict[str, Any] = await web.run(put)
        return result

    @router.get("/v1/vault/credentials", response_model=list[Credential])
    async def vault_list(who: Any = Depends(web.principal)) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await web.run(lambda: vault_for(who.actor).list())
        return found

    @router.get("/v1/vault/credentials/{cred_id}", response_model=Credential)
    async def vault_show(cred_id: str = PathParam(max_length=200), who: Any = Depends(web.principal)) -> dict[str, Any]:
        found: dict[str, Any] = await web.run(lambda: vault_for(who.actor).show(cred_id))
        return found

    @router.delete("/v1/vault/credentials/{cred_id}", response_model=Removed)
    async def vault_rm(cred_id: str = PathParam(max_length=200), who: Any = Depends(web.principal)) -> Removed:
        await web.run(lambda: vault_for(who.actor).remove(cred_id))
        return Removed(id=cred_id, rev="")

    return router


__all__ = ["vault_router"]
