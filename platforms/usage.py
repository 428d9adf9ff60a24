"""Meta's rate-limit usage headers, as sent with most Graph API answers.

    X-App-Usage                 {"call_count": 28, "total_time": 25, "total_cputime": 25}
    X-Business-Use-Case-Usage   {"<business id>": [{"type": "instagram", "call_count": 100,
                                  "total_cputime": 10, "total_time": 10,
                                  "estimated_time_to_regain_access": 15}]}
    X-Ad-Account-Usage          {"acc_id_util_pct": 9.67, "reset_time_duration": 0}

Every number but ``estimated_time_to_regain_access`` (minutes) and ``reset_time_duration``
(seconds) is a percentage of the limit; at 100 the calls fail with a rate-limit code. A caller
that reads ``usage.percent > 90`` stops before it gets there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

APP, BUSINESS, AD_ACCOUNT = "x-app-usage", "x-business-use-case-usage", "x-ad-account-usage"
_PERCENTS = ("call_count", "total_time", "total_cputime", "acc_id_util_pct")


def _json_object(value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class Usage:
    """The usage headers of one answer (empty dicts when a header was absent or not JSON)."""

    app: dict[str, Any] = field(default_factory=dict)
    business: dict[str, Any] = field(default_factory=dict)  # business id -> list of per-type usages
    ad_account: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Usage:
        """Parse the three headers from an answer's headers (case-insensitive for httpx.Headers)."""
        lower = {k.lower(): v for k, v in headers.items()}
        return cls(app=_json_object(lower.get(APP)), business=_json_object(lower.get(BUSINESS)),
                   ad_account=_json_object(lower.get(AD_ACCOUNT)))

    def _business_entries(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for entries in self.business.values():
            if isinstance(entries, list):
                out.extend(e for e in entries if isinstance(e, dict))
        return out

    @property
    def percent(self) -> float:
        """The highest percentage of any limit in any header (0 when none was sent)."""
        values = [_number(self.app.get(k)) for k in _PERCENTS]
        values += [_number(self.ad_account.get(k)) for k in _PERCENTS]
        values += [_number(e.get(k)) for e in self._business_entries() for k in _PERCENTS]
        return max((v for v in values if v is not None), default=0.0)

    @property
    def regain_access_minutes(self) -> float | None:
        """Meta's estimate of when a throttled business use case may call again, if it sent one."""
        values = [_number(e.get("estimated_time_to_regain_access")) for e in self._business_entries()]
        known = [v for v in values if v is not None]
        return max(known) if known else None

    @property
    def blocked(self) -> str | None:
        """Which limit is at 100 %: "app", "business use case <type>" or "ad account", if any."""
        if any((_number(self.app.get(k)) or 0) >= 100 for k in _PERCENTS):
            return "app"
        for entry in self._business_entries():
            if any((_number(entry.get(k)) or 0) >= 100 for k in _PERCENTS):
                return f"business use case {entry.get('type', '')}".strip()
        if (_number(self.ad_account.get("acc_id_util_pct")) or 0) >= 100:
            return "ad account"
        return None

    def near_limit(self, threshold: float = 90.0) -> bool:
        """True once any limit is above ``threshold`` percent: time to stop calling for a while."""
        return self.percent > threshold
