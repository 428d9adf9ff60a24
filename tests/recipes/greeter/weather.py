"""A test-sized platform adapter, as the platform recipe says: it takes the process's HTTP
client (``ctx.http``), knows its own URL, and turns every foreign failure into the one error
tree, so the product's tick decides what each means without knowing the service's codes."""

from __future__ import annotations

import httpx

from platforms.errors import Answer, AuthFailure, Transient
from platforms.transport import transport_error


class Weather:
    def __init__(self, http: httpx.Client, base_url: str = "https://weather.example") -> None:
        self.http = http
        self.base_url = base_url

    def today(self) -> str:
        try:
            r = self.http.get(f"{self.base_url}/today")
        except httpx.TransportError as exc:
            raise transport_error(exc, "read the weather", "weather") from None
        if r.status_code == 401:
            raise AuthFailure("read the weather: the service refused the key", Answer("weather", 401))
        if r.status_code >= 500:
            raise Transient("read the weather: the service failed; it is tried again later", Answer("weather", r.status_code))
        return str(r.json()["summary"])
