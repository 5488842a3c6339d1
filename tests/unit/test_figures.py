"""The figures: titles that say what is shown, one [0, 1] scale for attention, gates as bars, mistakes in red."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.colors import to_rgba

from attnexp.figures.alignment import caption_figure
from attnexp.figures.images import attention_figure, gates_figure, prediction_figure
from attnexp.figures.tokens import token_attention_figure


def texts(fig: plt.Figure) -> list[tuple[str, tuple]]:
    return [(t.get_text(), to_rgba(t.get_color())) for t in fig.axes[0].texts]


def test_prediction_grid_titles_each_image_true_then_predicted_with_mistakes_in_red():
    targets, preds = torch.tensor([3, 1, 4, 1, 5]), torch.tensor([3, 7, 4, 1, 2])
    fig = prediction_figure(torch.rand(5, 1, 28, 28), targets, preds, columns=2)
    assert len(fig.axes) == 1 and len(fig.axes[0].images) == 5
    red, black = to_rgba("red"), to_rgba("black")
    assert texts(fig) == [("3 -> 3", black), ("1 -> 7", red), ("4 -> 4", black), ("1 -> 1", black), ("5 -> 2", red)]
    assert fig._suptitle.get_text().startswith("true -> predicted")
    plt.close(fig)


def test_attention_maps_share_one_scale_with_a_colour_bar_and_labelled_axes():
    maps = [torch.rand(3, 2, 16, 16) * 0.2, None, torch.rand(3, 8)]  # layer 0: 2 heads; layer 2: SE gates
    fig = attention_figure(torch.rand(3, 3, 32, 32), maps)
    grid, bar = fig.axes  # one axes for every panel, one for the colour bar
    assert len(grid.images) == 3 * 3 and bar.get_ylabel() == "attention weight"
    shown = [t for t, _ in texts(fig)]
    assert (
        shown[:2] == ["input", "layer 0 head 0"] and "query patch" in shown and "key patch" in shown and "15" in shown
    )
    maps_shown = [im for im in grid.images if im.get_cmap().name == "viridis"]
    assert {im.get_clim() for im in maps_shown} == {(0.0, 1.0)}  # not stretched to each panel's own range
    torch.testing.assert_close(torch.as_tensor(maps_shown[0].get_array().data), maps[0][0, 0])
    plt.close(fig)
    assert attention_figure(torch.rand(3, 1, 8, 8), [torch.rand(3, 8)]) is None  # gates only: no attention figure


def test_gates_are_bars_per_channel_with_their_spread():
    gates = torch.tensor([[0.2, 0.9, 0.5], [0.4, 0.9, 0.5]])
    fig = gates_figure([None, gates])
    (ax,) = fig.axes
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.3, 0.9, 0.5]) and ax.get_xlabel() == "channel" and "layer 1" in ax.get_title()
    plt.close(fig)
    assert gates_figure([torch.rand(2, 1, 4, 4)]) is None


def test_token_attention_is_on_the_shared_scale():
    fig = token_attention_figure(["a", "b", "c"], [torch.rand(2, 3, 3) * 0.1])
    assert {ax.images[0].get_clim() for ax in fig.axes if ax.images} == {(0.0, 1.0)}
    plt.close(fig)


def test_next_token_figure_is_drawn_where_the_model_is_least_sure():
    from types import SimpleNamespace

    from attnexp.data.vocabulary import Vocabulary
    from attnexp.tasks import NextToken

    vocab = Vocabulary(["[unk]", "[bos]", "el", "perro", "come", "[eos]"], "word")
    ids = torch.tensor([1, 2, 3, 4, 5])
    logits = torch.full((1, 5, 6), -20.0)
    for position, token in enumerate([2, 3, 4, 5, 1]):
        logits[0, position, token] = 20.0  # sure everywhere...
    logits[0, 1] = 0.0  # ...but after "el": every token equally likely
    datamodule = SimpleNamespace(vocab=vocab, validation_sample=lambda n: ids)
    figures = NextToken(top_k=3).figures(lambda x: (logits, [None]), datamodule)
    title = figures["figures/next_token"].axes[0].get_title()
    assert "after '[bos] el'" in title and "true: 'perro'" in title and "entropy 1.79" in title
    for fig in figures.values():
        plt.close(fig)


def test_weights_outside_zero_to_one_widen_the_scale_instead_of_being_clipped():
    """A mixer's weights need not be distributions (ReLU attention's can pass 1): the scale then covers them."""
    fig = token_attention_figure(["a", "b", "c"], [torch.rand(2, 3, 3) * 3.0 + 0.5])
    ((low, high),) = {ax.images[0].get_clim() for ax in fig.axes if ax.images}
    assert low == 0.0 and high > 1.0
    plt.close(fig)
    fig = attention_figure(torch.rand(2, 1, 8, 8), [torch.rand(2, 1, 4, 4)])  # sigmoid's, in [0, 1]: the shared scale
    assert {im.get_clim() for im in fig.axes[0].images if im.get_cmap().name == "viridis"} == {(0.0, 1.0)}
    plt.close(fig)


def test_attention_inputs_are_gridded_and_numbered_by_patch_as_the_maps_count():
    """Finding 9: patch k of the input is row k and column k of every map (row by row); a class token is named."""
    from attnexp.figures.images import number_patches

    maps = [torch.rand(2, 1, 17, 17)]  # 16 patches of 7 x 7 and a class token
    fig = attention_figure(torch.rand(2, 1, 28, 28), maps)
    number_patches(fig, 7, 17)
    ax = fig.axes[0]
    inputs = [im for im in ax.images if im.get_extent()[0] < 1]
    numbers = [t for t in ax.texts if t.get_text().isdigit() and t.get_position()[0] < 1]  # over the inputs
    assert len(inputs) == 2 and len(numbers) == 2 * 16
    left, right, bottom, top = inputs[0].get_extent()  # y grows downwards: the image's top has the smaller y
    first = {int(t.get_text()): t.get_position() for t in numbers[:16]}
    assert first[0][0] < first[1][0] < first[3][0] and first[0][1] == first[3][1]  # along the first row
    assert first[4][1] > first[0][1] and first[4][0] == first[0][0]  # the next row starts under patch 0
    assert left < first[0][0] < left + (right - left) / 4 and top < first[0][1] < top + (bottom - top) / 4
    assert right - (right - left) / 4 < first[15][0] < right and bottom - (bottom - top) / 4 < first[15][1] < bottom
    assert sum(len(line.get_xdata()) == 2 for line in ax.lines) == 2 * (3 + 3)  # 3 inner lines each way per input
    assert [t.get_text() for t in ax.texts].count("16: class token") == 2
    plt.close(fig)


def test_each_layer_gets_its_own_attention_figure(tmp_path):
    from types import SimpleNamespace

    from attnexp.tasks import ImageClassification

    images = torch.rand(4, 1, 8, 8)
    loader = [(images, torch.arange(4))]
    data = SimpleNamespace(val_dataloader=lambda: loader, as_images=lambda x: x, patch_size=2)
    maps = [torch.rand(4, 2, 16, 16), torch.rand(4, 8), torch.rand(4, 1, 16, 16)]  # attention, gates, attention
    figures = ImageClassification(num_attention=2, num_predictions=4).figures(
        lambda x: (torch.rand(len(x), 10), maps), data
    )
    assert set(figures) == {
        "figures/predictions",
        "figures/gates",
        "figures/attention/layer0",
        "figures/attention/layer2",
    }
    titles = [t.get_text() for t in figures["figures/attention/layer0"].axes[0].texts if "head" in t.get_text()]
    assert titles == ["layer 0 head 0", "layer 0 head 1"] * 2
    for fig in figures.values():
        plt.close(fig)


def test_signed_weights_are_drawn_on_a_diverging_scale_centred_at_zero():
    """Weights within +-0.1 (a difference of maps) on a 0-1 scale would all look alike: the scale fits them, 0 white."""
    weights = torch.linspace(-0.08, 0.06, 16).view(1, 1, 4, 4).expand(2, 1, 4, 4)
    for fig in (
        attention_figure(torch.rand(2, 1, 8, 8), [weights]),
        token_attention_figure(list("abcd"), [weights[0]]),
    ):
        shown = [im for ax in fig.axes for im in ax.images if im.get_cmap().name == "RdBu_r"]
        (clim,) = {im.get_clim() for im in shown}  # one scale for every panel
        assert clim == pytest.approx((-0.08, 0.08))
        plt.close(fig)
    signed = torch.linspace(-0.08, 0.06, 32).view(1, 2, 16)  # 2 tokens' cross-attention over 16 patches (4 x 4)
    fig = caption_figure(torch.rand(1, 1, 8, 8), [["a", "b"]], [True], [signed])
    overlays = [im for ax in fig.axes for im in ax.images if im.get_cmap().name == "RdBu_r"]
    assert len(overlays) == 2 and {im.get_clim() for im in overlays} == {(-1.0, 1.0)}
    assert min(float(im.get_array().min()) for im in overlays) == pytest.approx(-1.0)  # the largest |weight| at the end
    plt.close(fig)


def overflow(fig: plt.Figure) -> float:
    """How far, in inches, what a figure draws reaches past its frame (0 when everything is inside)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the canvas TensorBoard's writer draws a figure on
    canvas.draw()
    drawn = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    return max(0.0, -drawn.x0, -drawn.y0, drawn.x1 - width, drawn.y1 - height)


@pytest.mark.parametrize("kind", ["signed", "distributions"])
def test_every_figure_keeps_its_colour_bar_labels_and_titles_inside_the_frame(kind):
    """Finding: text attention maps clipped their colour bar's tick labels (a signed map's scale could not be read);
    titles wider than their figure ran off both sides."""
    from attnexp.figures.alignment import alignment_figure

    draw = {
        "signed": lambda *shape: torch.linspace(-0.0812, 0.06, math.prod(shape)).view(*shape),
        "distributions": lambda *shape: torch.rand(*shape).softmax(-1),
    }[kind]
    figures = {
        "tokens": token_attention_figure(list("abcd"), [draw(2, 4, 4)]),
        "images": attention_figure(torch.rand(2, 1, 8, 8), [draw(2, 2, 4, 4)]),
        "alignment": alignment_figure([list("abcdef")], [list("xy")], [draw(1, 2, 6)]),
        "captions": caption_figure(torch.rand(2, 1, 8, 8), [["a", "b"], ["c"]], [True, False], [draw(1, 2, 16)] * 2),
    }
    outside = {name: round(overflow(fig), 3) for name, fig in figures.items()}
    assert outside == dict.fromkeys(figures, 0.0), outside
    for fig in figures.values():
        plt.close(fig)


def test_masked_cells_of_a_text_map_are_drawn_apart_from_zero_weights():
    """Finding: a causal layer's hidden cells and weights of 0 were one colour. The language model's maps show the
    keys after each query in grey, which no weight scale gives."""
    from types import SimpleNamespace

    from attnexp.data.vocabulary import Vocabulary
    from attnexp.tasks import NextToken

    vocab = Vocabulary(["[unk]", "[bos]", "el", "perro", "come", "[eos]"], "word")
    ids = torch.tensor([1, 2, 3, 4, 5])
    weights = torch.rand(1, 2, 5, 5).tril()
    weights[0, 0, 3, :2] = 0.0  # weights of 0 that the mask allows
    datamodule = SimpleNamespace(vocab=vocab, validation_sample=lambda n: ids)
    figures = NextToken().figures(lambda x: (torch.randn(1, 5, 6), [weights]), datamodule)
    shown = figures["figures/attention"].axes[0].images[0]
    cells = shown.get_array()
    assert (cells.mask == torch.ones(5, 5, dtype=torch.bool).triu(1).numpy()).all()
    hidden, zero = shown.cmap(cells)[0, 4], shown.cmap(shown.norm(cells))[3, 0]
    assert tuple(hidden) != tuple(zero) and tuple(hidden) == to_rgba("0.6")
    for fig in figures.values():
        plt.close(fig)


def test_a_recall_task_draws_each_heads_attention_from_its_answer_positions():
    """Finding: MQAR runs drew no figures for any mixer, and no doc said so."""
    from functools import partial

    from attnexp.data import MQARDataModule
    from attnexp.mixers import DotAttention
    from attnexp.networks import LanguageModel
    from attnexp.tasks import AnswerTokens
    from attnexp.tokens import NO_TARGET

    data = MQARDataModule(vocab=64, seq_len=48, num_pairs=6, train_size=50, val_size=20, test_size=20)
    data.setup()
    torch.manual_seed(0)
    net = LanguageModel(partial(DotAttention, heads=2), vocab_size=64, context=48, dim=16, depth=2).eval()
    with torch.no_grad():
        figures = AnswerTokens(max_tokens=32).figures(lambda x: net(x, need_weights=True), data)
    fig = figures["figures/attention"]
    x, y = data.splits["val"][0][0], data.splits["val"][1][0]
    answers = (y != NO_TARGET).nonzero().flatten().tolist()
    start = max(0, answers[-1] + 1 - 32)
    (ax, _) = fig.axes  # the maps, the colour bar
    titles = [t.get_text() for t in ax.texts if t.get_text().startswith("layer")]
    assert titles == [f"layer {i} head {h}" for i in range(2) for h in range(2)]
    down = [int(t.get_text()) for t in ax.texts if t.get_gid() == "down"]  # each layer's queries, once
    across = [t for t in ax.texts if t.get_gid() == "across"]  # the keys, under the last layer's two maps
    assert down == [int(x[a]) for a in answers if a >= start] * 2 and len(across) == 2 * min(32, answers[-1] + 1)
    plt.close(fig)
