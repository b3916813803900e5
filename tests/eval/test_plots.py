"""Plots: what each figure draws (captured before it is closed) and that files are written whole."""

import pytest
import torch

from opformer.eval import plots


@pytest.fixture
def figures(monkeypatch):
    """Capture every figure the plotting functions save (nothing is written)."""
    captured = []

    def keep(fig, out, suptitle=""):
        captured.append((fig, suptitle))
        return out

    monkeypatch.setattr(plots, "_save", keep)
    yield captured
    plots._pyplot().close("all")


def test_loss_curves_draw_the_metrics_file(tmp_path, figures):
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("epoch,train_loss,val_relative_l2,lr,seconds\n1,0.5,0.25,0.001,1\n2,0.125,0.0625,0.001,1\n")
    plots.plot_losses(metrics, tmp_path / "losses.png")
    (ax,) = figures[0][0].axes
    train, val = ax.get_lines()
    assert list(train.get_xdata()) == [1, 2] and list(train.get_ydata()) == [0.5, 0.125]
    assert list(val.get_ydata()) == [0.25, 0.0625] and ax.get_yscale() == "log"


def test_1d_panels_show_each_samples_relative_error(tmp_path, figures):
    targets = torch.tensor([[3.0, 4.0], [1.0, 0.0]])[..., None]
    preds = torch.tensor([[3.0, 5.0], [1.0, 1.0]])[..., None]  # errors 1/5 and 1/1
    plots.plot_predictions_1d(targets, targets, preds, [2.0], tmp_path / "p.png", title="T")
    fig, suptitle = figures[0]
    assert suptitle == "T"
    assert [ax.get_title() for ax in fig.axes] == ["sample 0: relative L2 2.00e-01", "sample 1: relative L2 1.00e+00"]
    assert list(fig.axes[0].get_lines()[0].get_xdata()) == [0.0, 1.0]  # x = i L / n on the periodic grid


def test_2d_error_panel_is_the_absolute_difference(tmp_path, figures):
    targets = torch.arange(6.0).reshape(1, 2, 3, 1) + 1
    preds = targets.clone()
    preds[0, 1, 2, 0] += 2
    plots.plot_predictions_2d(targets, targets, preds, tmp_path / "p.png", names=("a", "u"))
    panels = [ax for ax in figures[0][0].axes if ax.get_title()]  # colour bars have no title
    assert [ax.get_title() for ax in panels[:3]] == ["sample 0: a", "sample 0: u (truth)", "sample 0: u (prediction)"]
    error = panels[3].get_images()[0].get_array()
    expected = (preds - targets)[0, ..., 0].abs().T
    assert error.shape == (3, 2) and torch.equal(torch.as_tensor(error.data), expected)


def test_rollout_frames_pick_evenly_spaced_times_on_the_truths_colour_scale(tmp_path, figures):
    truth = torch.arange(9.0).reshape(9, 1, 1, 1).expand(9, 2, 2, 1).clone()
    plots.plot_rollout_frames(truth, truth + 100, [0.5 * i for i in range(9)], tmp_path / "f.png", columns=3)
    axes = figures[0][0].axes
    assert [ax.get_title() for ax in axes] == ["truth, t = 0", "truth, t = 2", "truth, t = 4",
                                              "prediction, t = 0", "prediction, t = 2", "prediction, t = 4"]
    for ax in axes:
        image = ax.get_images()[0]
        frame = float(ax.get_title().split("= ")[1]) * 2
        assert image.get_clim() == (frame, frame)  # the truth's range, also for the prediction


def test_frame_image_of_a_3d_field_is_its_middle_slice():
    field = torch.arange(2 * 3 * 4 * 2.0).reshape(2, 3, 4, 2)
    assert torch.equal(plots._frame_image(field), field[:, :, 2, 0])


def test_files_are_whole_pngs_and_gifs_and_no_temporary_is_left(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    times = [0.1, 0.2, 0.3]
    truth = torch.randn(3, 4, 4, 1, generator=torch.Generator().manual_seed(0))
    png = plots.plot_rollout_errors(times, [0.1, 0.2, 0.4], tmp_path / "errors.png", title="rollout")
    gif = plots.animate_rollout(truth, truth * 0.5, times, tmp_path / "rollout.gif")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pil.open(gif) as image:
        assert image.format == "GIF" and image.n_frames == len(times)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["errors.png", "rollout.gif"]
