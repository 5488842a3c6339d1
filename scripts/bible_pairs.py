"""Write a data=pairs TSV of Bible verses, Spanish (Reina-Valera 1909) to English (World English Bible), from
Debian's SWORD packages, offline. Both translations are in the public domain (their modules' DistributionLicense).

    sudo apt-get install sword-text-sparv sword-text-web python3-pysword
    /usr/bin/python3 scripts/bible_pairs.py bible-spa-eng.tsv --max-words 24
    attnexp data=pairs data.path=bible-spa-eng.tsv

Verses are paired by book, chapter and verse (the Spanish module follows the KJV versification, the English one
NRSVA: the few verses numbered differently pair badly or are missing), stripped of their markup and footnotes,
and shuffled with a fixed seed, so data=pairs' positional split gives val and test verses from every book. A third
column names the verse. Reads pysword from the Python that runs it (Debian's /usr/bin/python3 has
python3-pysword; elsewhere `pip install pysword`).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

SOURCE, TARGET = "spaRV1909eb", "engWEB2015eb"
NOTE = re.compile(r"<note\b.*?</note>", re.DOTALL)
TAG = re.compile(r"<[^>]*>")


def plain(markup: str) -> str:
    """A verse's words: footnotes dropped, tags removed, whitespace (tabs, newlines) collapsed to single spaces."""
    return " ".join(TAG.sub("", NOTE.sub(" ", markup)).split())


def verses(bible, books) -> dict[tuple[str, int, int], str]:
    """Every verse of ``books`` as plain text, by (book, chapter, verse)."""
    found = {}
    for book in books:
        for chapter, length in enumerate(book.chapter_lengths, start=1):
            for verse in range(1, length + 1):
                text = plain(bible.get(books=[book.osis_name], chapters=[chapter], verses=[verse], clean=False))
                if text:
                    found[(book.osis_name, chapter, verse)] = text
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the TSV to write: spanish<TAB>english<TAB>reference")
    parser.add_argument("--sword", default="/usr/share/sword", help="the SWORD folder holding mods.d and modules")
    parser.add_argument(
        "--max-words", type=int, default=None, help="keep verses of at most this many words on both sides"
    )
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed")
    args = parser.parse_args()
    try:
        from pysword.modules import SwordModules
    except ImportError:
        sys.exit(
            "pysword is missing: sudo apt-get install python3-pysword (then run with /usr/bin/python3), "
            "or pip install pysword."
        )
    modules = SwordModules(args.sword)
    installed = modules.parse_modules()
    missing = [name for name in (SOURCE, TARGET) if name not in installed]
    if missing:
        sys.exit(
            f"SWORD modules {', '.join(missing)} are not in {args.sword}: "
            "sudo apt-get install sword-text-sparv sword-text-web."
        )
    source, target = (modules.get_bible_from_module(name) for name in (SOURCE, TARGET))
    books = [book for testament in source.get_structure().get_books().values() for book in testament]
    target_books = {book.osis_name for testament in target.get_structure().get_books().values() for book in testament}
    spanish = verses(source, books)
    english = verses(target, [book for book in books if book.osis_name in target_books])
    pairs = [(spanish[ref], english[ref], f"{ref[0]} {ref[1]}:{ref[2]}") for ref in spanish if ref in english]
    if args.max_words is not None:
        pairs = [p for p in pairs if max(len(p[0].split()), len(p[1].split())) <= args.max_words]
    random.Random(args.seed).shuffle(pairs)
    args.out.write_text("".join("\t".join(p) + "\n" for p in pairs), encoding="utf-8")
    print(f"{len(pairs)} verse pairs ({len(spanish)} Spanish, {len(english)} English verses) -> {args.out}")


if __name__ == "__main__":
    main()
