"""scripts/bible_pairs.py on a stand-in for pysword (no Debian package in the tests): verses paired by reference,
markup and footnotes dropped, tabs and newlines inside a verse collapsed, long verses left out, a fixed shuffle, and
the TSV read back by data=pairs."""

from __future__ import annotations

import runpy
import sys
import types
from types import SimpleNamespace

import pytest
from helpers import REPO

SOURCE = {
    ("Gen", 1, 1): '<w lemma="x">En el principio</w> creó <note type="x">nota</note>Dios.',
    ("Gen", 1, 2): "Y la tierra\testaba desordenada\ny vacía.",
    ("Gen", 1, 3): "Y dijo Dios: Sea la luz, y fue la luz, y vio Dios que la luz era buena en gran manera.",
    ("Jud", 1, 1): "Judas, siervo.",
}
TARGET = {
    ("Gen", 1, 1): "In the beginning, God created.",
    ("Gen", 1, 2): "The earth was formless and empty.",
    ("Gen", 1, 3): "God said, Let there be light, and there was light.",
}


class Bible:
    def __init__(self, verses, books):
        self.verses, self.books = verses, books

    def get_structure(self):
        books = [SimpleNamespace(osis_name=b, chapter_lengths=[3]) for b in self.books]
        return SimpleNamespace(get_books=lambda: {"ot": books})

    def get(self, books, chapters, verses, clean):
        assert clean is False
        return self.verses.get((books[0], chapters[0], verses[0]), "")


@pytest.fixture
def script(monkeypatch):
    bibles = {"spaRV1909eb": Bible(SOURCE, ["Gen", "Jud"]), "engWEB2015eb": Bible(TARGET, ["Gen"])}
    modules = types.ModuleType("pysword.modules")
    modules.SwordModules = lambda path: SimpleNamespace(
        parse_modules=lambda: bibles, get_bible_from_module=bibles.__getitem__
    )
    monkeypatch.setitem(sys.modules, "pysword", types.ModuleType("pysword"))
    monkeypatch.setitem(sys.modules, "pysword.modules", modules)
    return runpy.run_path(str(REPO / "scripts" / "bible_pairs.py"), run_name="imported_by_tests")


def test_verses_are_paired_by_reference_without_markup(script, tmp_path, monkeypatch):
    out = tmp_path / "bible.tsv"
    monkeypatch.setattr(sys, "argv", ["bible_pairs.py", str(out), "--max-words", "12"])
    script["main"]()
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(rows) == [
        ["En el principio creó Dios.", "In the beginning, God created.", "Gen 1:1"],
        ["Y la tierra estaba desordenada y vacía.", "The earth was formless and empty.", "Gen 1:2"],
    ]
    first = out.read_text(encoding="utf-8")
    script["main"]()
    assert out.read_text(encoding="utf-8") == first  # the same shuffle every time

    from attnexp.data.pairs import read_pairs, tokenize

    assert read_pairs(str(out), "word") == [(tokenize(r[0], "word"), tokenize(r[1], "word")) for r in rows]


def test_missing_modules_are_named(script, tmp_path, monkeypatch):
    sys.modules["pysword.modules"].SwordModules = lambda path: SimpleNamespace(parse_modules=lambda: {})
    monkeypatch.setattr(sys, "argv", ["bible_pairs.py", str(tmp_path / "x.tsv")])
    with pytest.raises(SystemExit, match="spaRV1909eb, engWEB2015eb are not in /usr/share/sword: sudo apt-get install"):
        script["main"]()
