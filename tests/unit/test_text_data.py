"""Text data: tokenising, vocabulary, split by position, windows, and the errors for bad files."""

from __future__ import annotations

import pytest
import torch

from attnexp.data import CorpusDataModule, TextDataModule, Vocabulary
from attnexp.data.corpus import SENTENCES
from attnexp.data.vocabulary import detokenize, tokenize
from attnexp.errors import AttnexpError


def test_vocabulary_round_trip_word_and_char():
    text = "The cat's cat, the [bos] cat."
    words = tokenize(text, "word")
    assert words == ["The", "cat's", "cat", ",", "the", "[bos]", "cat", "."]
    vocab = Vocabulary.build(words, "word")
    assert vocab.tokens[:2] == ["[unk]", "cat"]  # [unk] first, then by frequency
    ids, unknown = vocab.encode(words)
    assert unknown == [] and vocab.decode(ids.tolist()) == words
    again = Vocabulary.from_state(vocab.state_dict())
    assert again.tokens == vocab.tokens and again.level == "word"
    ids, unknown = vocab.encode(["cat", "dog", "[unk]"])
    assert ids.tolist() == [vocab.ids["cat"], 0, 0] and unknown == ["dog"]

    chars = tokenize("ab\nba é", "char")
    char_vocab = Vocabulary.build(chars, "char")
    ids, _ = char_vocab.encode(chars)
    assert detokenize(char_vocab.decode(ids.tolist()), "char") == "ab\nba é"


def write(tmp_path, text: str, name: str = "book.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_split_by_position_windows_and_unk(tmp_path):
    train_words = " ".join(f"w{i % 7}" for i in range(80))
    path = write(tmp_path, train_words + " " + " ".join(["w1", "neu"] * 5) + " " + " ".join(["w2"] * 10))
    dm = TextDataModule(str(path), level="word", context=4, val_fraction=0.1, test_fraction=0.1, batch_size=8)
    assert dm.spec == {"vocab_size": 8, "context": 4}  # [unk] + w0..w6: the vocabulary comes from train only
    assert dm.streams["val"].tolist() == [dm.vocab.ids["w1"], 0] * 5  # "neu" was not in the training part
    assert dm.streams["test"].tolist() == [dm.vocab.ids["w2"]] * 10
    x, y = dm.splits["train"]
    assert x.shape == (19, 4) and torch.equal(x[:, 1:], y[:, :-1])  # targets = inputs shifted by one
    assert torch.equal(x.flatten(), dm.streams["train"][:76])  # stride = context: no overlap, no gap
    batch_x, batch_y = next(iter(dm.train_dataloader()))
    assert batch_x.shape == (8, 4) and batch_y.dtype == torch.long


def test_corpus_is_wrapped_sentences():
    dm = CorpusDataModule(context=8, repeats=3)
    tokens = dm.vocab.decode(dm.streams["train"].tolist()) if dm.spec else []
    assert tokens[:7] == ["[bos]", "el", "perro", "come", "un", "hueso", "[eos]"]
    assert tokens.count("[bos]") == tokens.count("[eos]") == len(SENTENCES)
    windows = len(tokens) - 8  # stride 1: a window at every start
    assert len(dm.splits["train"][0]) == 3 * windows  # an epoch goes over it `repeats` times
    sample = dm.vocab.decode(dm.validation_sample(24).tolist())
    assert sample[0] == "[bos]" and sample[-1] == "[eos]" and "[eos]" not in sample[:-1]


def not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("año de la cigüeña ".encode("latin-1") * 20)
    return path


BAD = {
    "no path": (lambda p: None, {}, r"data=text needs a file: add data.path="),
    "empty": (lambda p: write(p, ""), {}, r"is empty: there is nothing to learn"),
    "whitespace only": (lambda p: write(p, " \n\n\t"), {}, r"is empty \(only whitespace\)"),
    "missing": (lambda p: p / "nope.txt", {}, r"Cannot read data.path=.*nope.txt.*readable UTF-8 text file"),
    "a folder": (lambda p: p, {}, r"Cannot read data.path=.*check the path"),
    "not UTF-8": (not_utf8, {}, r"is not UTF-8 text: byte 1 \(line 1\) is 0xf1.*iconv"),
    "context too long": (
        lambda p: write(p, "one two three " * 10),
        {"context": 5},
        r"data.context=5 is longer than the text allows.*30 word tokens.*data.context<=2",
    ),
    "bad level": (
        lambda p: write(p, "abc " * 50),
        {"level": "byte"},
        r"data.level='byte' is not a tokenisation level. Allowed: word, char",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_files_raise_clear_errors(case, tmp_path):
    make, kwargs, message = BAD[case]
    path = make(tmp_path)
    with pytest.raises(AttnexpError, match=message):
        _ = TextDataModule(str(path) if path else None, **{"context": 4, **kwargs}).spec


@pytest.mark.parametrize(
    "content",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8,  # an image
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(200),  # a zip archive
        b"abc" + bytes(range(1, 32)) * 100,  # control bytes, no NUL: valid UTF-8, but no text
    ],
    ids=["png", "zip", "control bytes"],
)
def test_a_binary_file_is_no_text_and_gets_no_conversion_advice(tmp_path, content):
    """Finding 7: converting such a file from latin1 would give garbage to learn from."""
    path = tmp_path / "file.bin"
    path.write_bytes(content)
    with pytest.raises(
        AttnexpError, match=r"is not a text file: its first bytes hold NUL or other control bytes"
    ) as err:
        TextDataModule(path=str(path)).setup()
    assert "iconv" not in str(err.value)


def test_utf16_and_latin1_text_get_the_command_that_converts_them(tmp_path):
    for encoding, source in (("utf-16", "utf-16"), ("latin1", "latin1")):
        path = tmp_path / f"{encoding}.txt"
        path.write_bytes("le café du señor\n".encode(encoding) * 50)
        with pytest.raises(AttnexpError, match=f"iconv -f {source} -t utf-8 {path}"):
            TextDataModule(path=str(path)).setup()
