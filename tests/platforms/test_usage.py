"""Meta's usage headers, parsed from the documented shapes."""

from __future__ import annotations

import json

import httpx

from platforms.usage import Usage


def test_the_three_headers_and_the_highest_percentage():
    headers = httpx.Headers({
        "x-app-usage": json.dumps({"call_count": 28, "total_time": 25, "total_cputime": 25}),
        "X-Business-Use-Case-Usage": json.dumps({"1784": [{"type": "instagram", "call_count": 12, "total_cputime": 93,
                                                           "total_time": 10, "estimated_time_to_regain_access": 0}]}),
        "X-Ad-Account-Usage": json.dumps({"acc_id_util_pct": 9.67, "reset_time_duration": 0, "ads_api_access_tier": "standard_access"}),
    })
    usage = Usage.from_headers(headers)
    assert usage.app["call_count"] == 28 and usage.ad_account["acc_id_util_pct"] == 9.67
    assert usage.percent == 93 and usage.near_limit() and usage.blocked is None
    assert usage.regain_access_minutes == 0


def test_a_blocked_limit_and_its_regain_time():
    usage = Usage.from_headers({"X-Business-Use-Case-Usage": json.dumps(
        {"1784": [{"type": "instagram", "call_count": 100, "estimated_time_to_regain_access": 7}]})})
    assert usage.blocked == "business use case instagram" and usage.regain_access_minutes == 7
    assert Usage.from_headers({"X-App-Usage": json.dumps({"call_count": 100})}).blocked == "app"


def test_absent_or_broken_headers_read_as_no_usage():
    for headers in ({}, {"X-App-Usage": "not json"}, {"X-App-Usage": "[1, 2]"}, {"X-App-Usage": json.dumps({"call_count": "high"})}):
        usage = Usage.from_headers(headers)
        assert usage.percent == 0 and not usage.near_limit() and usage.regain_access_minutes is None
