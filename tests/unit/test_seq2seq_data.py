"""Sequence-to-sequence data: dates, sentence pairs and digit captions; sizes, seeds, splits, and bad files."""

from __future__ import annotations

import datetime

import pytest
import torch

from attnexp.data import CaptionsDataModule, DatesDataModule, PairsDataModule
from attnexp.data.captions import WORDS, canvas_from_file
from attnexp.data.date_formats import render
from attnexp.errors import AttnexpError
from attnexp.tokens import BOS_ID, EOS_ID, PAD_ID, SEQ2SEQ_SPECIALS

SMALL_DATES = dict(train_size=600, val_size=100, test_size=100)


def test_vocabularies_start_with_the_ids_the_network_uses():
    assert [SEQ2SEQ_SPECIALS.index(t) for t in ("[pad]", "[bos]", "[eos]")] == [PAD_ID, BOS_ID, EOS_ID]


def test_dates_sizes_targets_and_sources_agree():
    dm = DatesDataModule(**SMALL_DATES)
    spec = dm.spec
    assert {k: len(v[0]) for k, v in dm.splits.items()} == {"train": 600, "val": 100, "test": 100}
    assert spec["tgt_len"] == 12 and dm.splits["train"][1].shape == (600, 12)
    assert spec["src_len"] == max(len(s) for part in dm.examples.values() for s, _ in part)
    x, y = dm.splits["train"]
    assert (y[:, 0] == BOS_ID).all() and (y[:, -1] == EOS_ID).all()  # [bos] YYYY-MM-DD [eos]
    for i in range(0, 600, 37):  # ids decode to the texts, and the source writes the target's date
        source, target = dm.examples["train"][i]
        assert "".join(dm.tgt_vocab.decode(y[i, 1:-1].tolist())) == target
        assert "".join(dm.source_tokens(x[i])) == source
        day = datetime.date.fromisoformat(target)
        assert source in {render(day, f) for f in dm.formats}
    assert len({s for s, _ in dm.examples["train"]}) > 500 and len(set(dm.formats)) >= 20


def test_dates_split_by_date_and_reproducible_from_the_seed():
    dm = DatesDataModule(**SMALL_DATES)
    dm.setup()
    dates = {split: {t for _, t in part} for split, part in dm.examples.items()}
    assert not dates["train"] & dates["test"] and not dates["train"] & dates["val"] and not dates["val"] & dates["test"]
    again = DatesDataModule(**SMALL_DATES)
    again.setup()
    assert all(torch.equal(dm.splits[k][i], again.splits[k][i]) for k in dm.splits for i in (0, 1))
    other = DatesDataModule(**SMALL_DATES, split_seed=1)
    other.setup()
    assert other.examples["test"] != dm.examples["test"]
    bigger = DatesDataModule(train_size=900, val_size=100, test_size=100)  # more training data: same test set
    bigger.setup()
    assert bigger.examples["test"] == dm.examples["test"]


def test_dates_range_too_small_for_the_sizes_is_explained():
    with pytest.raises(AttnexpError, match=r"need as many different dates, but 2000-2000 has 366"):
        DatesDataModule(first_year=2000, last_year=2000, train_size=300, val_size=50, test_size=50)
    wide = DatesDataModule(first_year=1800, last_year=2100, **SMALL_DATES)
    assert "es_numeric_short" not in wide.formats  # two-digit years only where they name one year


def write(tmp_path, text: str | bytes, name: str = "pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


def test_pairs_split_by_position_with_vocabularies_from_train(tmp_path):
    lines = [f"uno dos {i % 3}\tone two {i % 3}\textra" for i in range(16)] + [
        "",
        "uno nuevo\tone new",
        "dos\ttwo",
        "tres\tthree .",
    ]
    dm = PairsDataModule(write(tmp_path, "\n".join(lines) + "\n"), level="word", val_fraction=0.1, test_fraction=0.2)
    spec = dm.spec
    assert {k: len(v[0]) for k, v in dm.splits.items()} == {
        "train": 13,
        "val": 1,
        "test": 5,
    }  # 19 pairs, the blank line skipped
    assert spec["src_len"] == 3 and spec["tgt_len"] == 3 + 2
    assert "nuevo" not in dm.src_vocab.ids and "new" not in dm.tgt_vocab.ids  # only from the training part
    x, y = dm.splits["test"]
    assert dm.src_vocab.decode(x[2].tolist()) == ["uno", "[unk]", "[pad]"]
    assert dm.tgt_vocab.decode(y[2].tolist()) == ["[bos]", "one", "[unk]", "[eos]", "[pad]"]
    restored = PairsDataModule(dm.path)
    restored.load_state_dict(dm.state_dict())  # the vocabularies of a checkpoint win
    assert restored.spec == spec and restored.src_vocab.tokens == dm.src_vocab.tokens
    chars = PairsDataModule(dm.path, level="char")
    assert chars.spec["src_len"] == len("uno nuevo") and chars.src_vocab.level == "char"


@pytest.mark.parametrize(
    "text, message",
    [
        ("hola\thello\nadios goodbye\n", r"line 2, has no tab: 'adios goodbye'.*source<TAB>target"),
        ("hola\thello\n\t bye\n", r"line 2, has an empty source \(before the first tab\)"),
        ("hola\thello\nadios\t \n", r"line 2, has an empty target \(after the first tab\)"),
        (b"hola\thello\nadi\xf3s\tbye\n", r"not UTF-8 text: byte 14 \(line 2\) is 0xf3.*iconv.*> pairs.utf8.tsv"),
        (
            "hola\thello\nadios\tbye\n",
            r"has 2 pairs, too few to split into train / val / test \(1 / 0 / 1.*at least 10 pairs",
        ),
        ("\n\n", r"is empty \(only whitespace\)"),
    ],
)
def test_bad_pairs_files_are_explained(tmp_path, text, message):
    with pytest.raises(AttnexpError, match=message):
        PairsDataModule(write(tmp_path, text)).setup()


def test_pairs_lines_end_at_newlines_only_and_a_bom_is_counted(tmp_path):
    dm = PairsDataModule(write(tmp_path, "".join(f"uno\u2028{i}\tone {i}\r\n" for i in range(10))))
    assert dm.spec["src_len"] == 2 and sum(len(x) for x, _ in dm.splits.values()) == 10  # "uno", "7": a line separator
    assert dm.tgt_vocab.tokens[4] == "one" and "\r" not in dm.tgt_vocab.ids  # inside a sentence is no line break
    with pytest.raises(AttnexpError, match=r"byte 5 \(line 1\) is 0xff"):
        PairsDataModule(write(tmp_path, b"\xef\xbb\xbfab\xff\tc\n", "bom.tsv")).setup()


def test_a_changed_data_file_does_not_match_its_checkpoint(tmp_path):
    path = write(tmp_path, "".join(f"uno {i}\tone {i}\n" for i in range(20)))
    dm = PairsDataModule(path)
    dm.setup()
    state = dm.state_dict()
    dm.load_state_dict(state)  # the same data: fine
    write(tmp_path, "".join(f"dos {i}\ttwo {i}\n" for i in range(20)))
    changed = PairsDataModule(path)
    changed.setup()
    with pytest.raises(AttnexpError, match=r"no longer matches the checkpoint: its src_vocab, tgt_vocab differ"):
        changed.load_state_dict(state)


def test_pairs_need_a_path(tmp_path):
    with pytest.raises(AttnexpError, match=r"data=pairs needs a file: add data.path="):
        PairsDataModule().setup()
    with pytest.raises(AttnexpError, match=r"Cannot read data.path=.*missing.tsv"):
        PairsDataModule(str(tmp_path / "missing.tsv")).setup()


SMALL_CAPTIONS = dict(images="digits", train_size=500, val_size=100, test_size=100)


def test_captions_canvases_and_their_words():
    dm = CaptionsDataModule(**SMALL_CAPTIONS, language="es")
    assert dm.spec == {
        "channels": 1,
        "image_height": 8,
        "image_width": 24,
        "patch_size": 4,
        "tgt_vocab_size": 14,
        "tgt_len": 5,
    }
    x, y = dm.splits["train"]
    assert x.shape == (500, 1, 8, 24) and abs(float(x.mean())) < 1e-4  # normalised with the training canvases' stats
    counts = ((y != PAD_ID) & (y != BOS_ID) & (y != EOS_ID)).sum(1)
    assert set(counts.tolist()) == {1, 2, 3}
    blank = x.min()
    for i in range(0, 500, 23):  # a slot holds a digit exactly when the caption has a word for it
        slots = x[i, 0].unflatten(1, (3, 8))  # (8, 3, 8)
        filled = [bool((slots[:, j] != blank).any()) for j in range(3)]
        assert filled == [j < int(counts[i]) for j in range(3)]
        words = dm.tgt_vocab.decode(y[i, 1 : 1 + int(counts[i])].tolist())
        assert all(w in WORDS["es"] for w in words) and y[i, 1 + int(counts[i])] == EOS_ID


def test_captions_never_show_a_test_or_val_image_in_training_and_repeat_from_the_seed():
    dm = CaptionsDataModule(**SMALL_CAPTIONS)
    dm.setup()
    train_x, _, test_x, _ = dm.load()
    assert not set(dm.pool_index["train"].tolist()) & set(dm.pool_index["val"].tolist())
    pools = {"train": train_x[dm.pool_index["train"]], "val": train_x[dm.pool_index["val"]], "test": test_x}
    as_bytes = {k: {img.numpy().tobytes() for img in v} for k, v in pools.items()}
    stats = dm.stats
    for split in ("train", "val", "test"):  # every digit of a split's canvases is an image of its own pool
        x = dm.splits[split][0][:40] * stats["std"] + stats["mean"]
        tiles = x.unflatten(-1, (3, 8)).permute(0, 3, 1, 2, 4)  # (n, slot, 1, 8, 8)
        for tile in tiles.flatten(0, 1):
            if tile.abs().max() > 1e-3:
                key = min(pools[split], key=lambda img: float((img - tile).abs().max()))
                assert float((key - tile).abs().max()) < 1e-5
                assert key.numpy().tobytes() in as_bytes[split]
    assert not as_bytes["test"] & as_bytes["train"] and not as_bytes["val"] & as_bytes["train"]
    again = CaptionsDataModule(**SMALL_CAPTIONS)
    again.setup()
    assert all(torch.equal(dm.splits[k][i], again.splits[k][i]) for k in dm.splits for i in (0, 1))


def test_captions_bad_options_and_image_files(tmp_path):
    with pytest.raises(AttnexpError, match=r"data.language='fr' is not an option.*en, es"):
        CaptionsDataModule(language="fr")
    with pytest.raises(AttnexpError, match=r"data.images='cifar' is not an option.*mnist, digits"):
        CaptionsDataModule(images="cifar")
    with pytest.raises(AttnexpError, match=r"Cannot read image=.*not_an_image.png"):
        canvas_from_file(write(tmp_path, "text", "not_an_image.png"), 8, 24, {"mean": 0.0, "std": 1.0})


def test_an_image_file_becomes_the_canvas_it_shows(tmp_path):
    from PIL import Image

    dm = CaptionsDataModule(**SMALL_CAPTIONS)
    dm.setup()
    x = dm.splits["test"][0][:1]
    raw = (x * dm.stats["std"] + dm.stats["mean"])[0, 0]  # [0, 1]
    path = tmp_path / "canvas.png"
    Image.fromarray((raw * 255).round().byte().numpy()).save(path)
    torch.testing.assert_close(
        canvas_from_file(str(path), 8, 24, dm.stats), x[0], atol=0.6 / 255 / dm.stats["std"], rtol=0
    )
    big = tmp_path / "big_inverted.png"  # twice the size, dark ink on white paper
    Image.fromarray(((1 - raw) * 255).round().byte().numpy()).resize((48, 16), Image.Resampling.NEAREST).save(big)
    torch.testing.assert_close(canvas_from_file(str(big), 8, 24, dm.stats), x[0], atol=0.05 / dm.stats["std"], rtol=0)
