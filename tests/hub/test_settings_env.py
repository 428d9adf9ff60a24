"""``SKYHUB_*`` variables as settings (``hub.settings.env_input``): nesting with ``__``, JSON for sections,
lists and tables, unknown names at the root left alone, a typo under a section refused, and the layers'
order (options over variables over files)."""

from __future__ import annotations

import pytest

from hub.settings import load_settings
from ledger import Usage


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.upper().startswith("SKYHUB_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_nested_variables_set_a_sections_keys_in_any_case(monkeypatch):
    monkeypatch.setenv("SKYHUB_FEED__LEASE", "5s")
    monkeypatch.setenv("skyhub_feed__batch_size", "3")
    monkeypatch.setenv("SKYHUB_PORT", "9001")
    s = load_settings()
    assert (s.feed.lease, s.feed.batch_size, s.port) == (5.0, 3, 9001)


def test_a_list_is_json_and_a_bad_one_says_how_to_write_it(monkeypatch):
    monkeypatch.setenv("SKYHUB_HTTP__TRUSTED_PROXIES", '["127.0.0.1"]')
    assert load_settings().http.trusted_proxies == ["127.0.0.1"]
    monkeypatch.setenv("SKYHUB_HTTP__TRUSTED_PROXIES", "127.0.0.1")
    with pytest.raises(Usage) as err:
        load_settings()
    assert "SKYHUB_HTTP__TRUSTED_PROXIES must be JSON" in err.value.reason
    assert "127.0.0.1" not in err.value.reason  # the value is not repeated (it may be a secret)


def test_a_whole_section_as_json_merges_with_its_nested_variables(monkeypatch):
    monkeypatch.setenv("SKYHUB_FEED", '{"lease": "7s", "batch_size": 4}')
    monkeypatch.setenv("SKYHUB_FEED__BATCH_SIZE", "6")
    s = load_settings()
    assert (s.feed.lease, s.feed.batch_size) == (7.0, 6)


def test_unknown_names_at_the_root_are_left_alone_but_a_typo_in_a_section_is_refused(monkeypatch):
    monkeypatch.setenv("SKYHUB_SOMETHING_ELSE", "x")  # another tool's variable
    load_settings()
    monkeypatch.setenv("SKYHUB_FEED__LEAES", "5s")
    with pytest.raises(Usage) as err:
        load_settings()
    assert "feed.leaes is not a setting (SKYHUB_FEED__LEAES" in err.value.reason


def test_options_win_over_variables_and_variables_over_files(monkeypatch, tmp_path):
    mine = tmp_path / "mine.toml"
    mine.write_text('port = 9100\nlog_level = "DEBUG"\n[feed]\nlease = "20s"\nbatch_size = 2\n')
    monkeypatch.setenv("SKYHUB_PORT", "9200")
    monkeypatch.setenv("SKYHUB_FEED__LEASE", "30s")
    s = load_settings(str(mine), port=9300)
    assert (s.port, s.log_level, s.feed.lease, s.feed.batch_size) == (9300, "DEBUG", 30.0, 2)


def test_a_secret_from_a_variable_stays_secret(monkeypatch):
    monkeypatch.setenv("SKYHUB_TOKEN", "s3cret-token")
    s = load_settings()
    assert s.token.get_secret_value() == "s3cret-token"
    assert "s3cret-token" not in repr(s)
