"""The image figures: every panel drawn with its title, wrong predictions in red, one axes per figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.colors import to_rgba

from attnexp.figures.images import attention_figure, prediction_figure


def titles(fig: plt.Figure) -> list[tuple[str, tuple]]:
    return [(t.get_text(), to_rgba(t.get_color())) for t in fig.axes[0].texts]


def test_prediction_grid_titles_each_image_true_over_predicted_with_mistakes_in_red():
    targets, preds = torch.tensor([3, 1, 4, 1, 5]), torch.tensor([3, 7, 4, 1, 2])
    fig = prediction_figure(torch.rand(5, 1, 28, 28), targets, preds, columns=2)
    assert len(fig.axes) == 1 and len(fig.axes[0].images) == 5
    red, black = to_rgba("red"), to_rgba("black")
    assert titles(fig) == [("3/3", black), ("1/7", red), ("4/4", black), ("1/1", black), ("5/2", red)]
    plt.close(fig)


def test_attention_figure_has_the_input_and_every_head_and_gate_panel_per_sample():
    maps = [torch.rand(3, 2, 16, 16), None, torch.rand(3, 8)]  # layer 0: 2 heads; layer 2: SE gates
    fig = attention_figure(torch.rand(3, 3, 32, 32), maps)
    assert len(fig.axes) == 1 and len(fig.axes[0].images) == 3 * 4
    assert [text for text, _ in titles(fig)][:4] == ["input", "layer 0 head 0", "layer 0 head 1", "layer 2 gates"]
    shown = fig.axes[0].images[1].get_array()  # sample 0, layer 0, head 0
    torch.testing.assert_close(torch.as_tensor(shown.data), maps[0][0, 0])
    plt.close(fig)
