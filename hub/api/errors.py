"""The API's error bodies (``{"error": code, "reason": sentence}``) and the handlers that answer
every failure with one: an error of the tree with its own status, a body or a parameter that
cannot be read (422), an unknown path or method, and a bug (500, the details in the log)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ledger import LedgerError

from ..gate import Unprocessable


class ErrorBody(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    error: str = Field(
        description="A stable code: invalid, unauthorized, forbidden, not_found, timeout, conflict, too_large, backend, error"
    )
    reason: str = Field(description="One sentence a person can act on")


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 408, 409, 413, 422, 500, 503)
}


def error(code: str, reason: str, status: int) -> JSONResponse:
    """An error body with its status."""
    return JSONResponse({"error": code, "reason": reason}, status_code=status)


def refusal(exc: LedgerError) -> JSONResponse:
    """Any error of the tree, answered with the status its class declares."""
    return error(exc.code, exc.reason, exc.status)


def _unreadable(cause: BaseException) -> str:
    if isinstance(cause, RecursionError):
        return "it is nested too deeply"
    if isinstance(cause, UnicodeDecodeError):
        return "it is not UTF-8"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "a number has too many digits (more than 4,300)"
    return f"{type(cause).__name__}"


def install(api: FastAPI) -> None:
    """Answer every failure on ``api`` with an error body."""

    @api.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> JSONResponse:
        return refusal(exc)

    @api.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            at = first.get("loc", ("body", "?"))[-1]
            return refusal(Unprocessable(f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'decode error')} at {at})"))
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return refusal(Unprocessable(f"{where}: {first.get('msg', 'is not valid')}"))

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not parse the body
            return refusal(Unprocessable(f"the body is not JSON the hub can read: {_unreadable(exc.__cause__)}"))
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid")
        return error(code, str(exc.detail), exc.status_code)

    @api.exception_handler(Exception)
    async def failure(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not bad input: the body keeps the API's shape; uvicorn logs the traceback
        return error("error", f"the hub failed on this request ({type(exc).__name__}); its log has the details", 500)
