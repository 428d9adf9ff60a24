"""The console's import over HTTP against a real `skyhub run`: the check writes nothing and gives
every row its sentence, the import writes the valid rows only, a form without the session's CSRF
value is refused and writes nothing, a file that is not a calendar is one sentence."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import pytest

from publishers.listing import by_time
from skyhub_testkit.hub import Hub
from tests.publishers.test_import import rows

from .conftest import Console, signed_in

IMPORT = "/console/publish/import"


@pytest.fixture
def shop(tmp_path: Path, key_text: str) -> Iterator[tuple[Hub, Console]]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__ACCOUNTS__IG": "17841400000000000",
        "SKYHUB_PUBLISH__ACCOUNTS__THREADS": "2900000000000001", "SKYHUB_PUBLISH__EVERY": "1h"})
    yield from signed_in(hub, "maya")


def test_check_then_import(shop):
    hub, console = shop
    checked = console.post(IMPORT, {"content": rows(), "name": "week.csv", "action": "check"}, form_page=IMPORT)
    text = html.unescape(checked.text)
    assert checked.status_code == 200 and "8 would be new, 0 would be updated, 0 unchanged, 2 invalid" in text
    assert "row 5, images:" in text and 'id="import-row-9"' in text and by_time(hub.admin) == []
    done = console.post(IMPORT, {"content": rows(), "name": "week.csv", "action": "import"}, form_page=IMPORT)
    assert "8 new, 0 updated, 0 unchanged, 2 invalid" in html.unescape(done.text)
    assert len({d["post"] for d in by_time(hub.admin)}) == 8


def test_a_form_without_the_csrf_value_writes_nothing(shop):
    hub, console = shop
    refused = console.http.post(IMPORT, data={"content": rows(), "action": "import", "csrf": "forged"})
    assert refused.status_code == 403 and by_time(hub.admin) == []


def test_a_file_that_is_not_a_calendar_is_one_sentence(shop):
    hub, console = shop
    bad = console.post(IMPORT, {"content": "when,what\n1,2\n", "action": "check"}, form_page=IMPORT)
    assert bad.status_code == 422 and 'role="alert"' in bad.text and by_time(hub.admin) == []
    empty = console.post(IMPORT, {"content": "  ", "action": "import"}, form_page=IMPORT)
    assert empty.status_code == 422 and "choose a CSV or JSON file, or paste one, first" in empty.text
