"""Writes racing at the moment a document is created, on each local backend."""

from __future__ import annotations

import threading

from tests.conftest import open_backend


def test_a_blind_write_that_races_the_creation_of_its_document_overwrites_it(store, backend_url):
    """A writer that finds no document and writes blind, while another transaction is creating
    that document, must not fail with a conflict: it waits for the creation and overwrites it,
    as a blind write does (the creator's transaction is held open until the writer waits)."""
    other = open_backend(backend_url)  # a second store: nothing it has seen helps the first
    holding, release, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def create() -> None:
        try:
            with other._tx() as cur:
                cur.execute(other.q.insert_doc, {"db": "notes", "id": "n", "rev": "1-0000000000000001",
                                                 "body": '{"v": "creator"}', "deleted": 0, "at": 1})
                holding.set()
                release.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            holding.set()

    def write() -> None:
        try:
            store.put("notes", {"v": "writer"}, "n", actor="user:ana")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            done.set()

    creator = threading.Thread(target=create)
    creator.start()
    assert holding.wait(30)
    writer = threading.Thread(target=write)
    writer.start()
    assert not done.wait(0.3), "the blind write did not wait for the open creation"
    release.set()
    creator.join(30)
    writer.join(30)
    other.close()
    assert errors == []
    doc = store.get("notes", "n")
    assert doc["v"] == "writer" and doc["_rev"].startswith("2-")
