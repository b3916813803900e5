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


def _assert_laid_out(fig):
    """Every plotting axes has an x and a y label, every colour bar a label, and no two axes overlap.

    Colour bars are the axes without images or lines; overlap is of the drawn extents (tick labels,
    axis labels and titles included).
    """
    fig.canvas.draw()
    for ax in fig.axes:
        if ax.get_images() or ax.get_lines():
            assert ax.get_xlabel() and ax.get_ylabel(), ax.get_title()
        else:
            assert ax.get_xlabel() or ax.get_ylabel()
    boxes = [ax.get_tightbbox() for ax in fig.axes]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0, (a, b)


def _colour_bars(fig):
    return [ax for ax in fig.axes if not (ax.get_images() or ax.get_lines())]


def test_loss_curves_draw_the_metrics_file(tmp_path, figures):
    metrics = tmp_path / "metrics.csv"
    metrics.write_text("epoch,train_loss,val_relative_l2,lr,seconds\n1,0.5,0.25,0.001,1\n2,0.125,0.0625,0.001,1\n")
    plots.plot_losses(metrics, tmp_path / "losses.png")
    fig = figures[0][0]
    (ax,) = fig.axes
    train, val = ax.get_lines()
    assert list(train.get_xdata()) == [1, 2] and list(train.get_ydata()) == [0.5, 0.125]
    assert list(val.get_ydata()) == [0.25, 0.0625] and ax.get_yscale() == "log"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("epoch", "loss, relative L2")
    _assert_laid_out(fig)


@pytest.mark.slow
def test_1d_rows_show_each_samples_relative_error_and_its_pointwise_error(tmp_path, figures):
    targets = torch.tensor([[3.0, 4.0], [1.0, 0.0]])[..., None]
    preds = torch.tensor([[3.0, 5.0], [1.0, 1.5]])[..., None]  # errors 1/5 and 1.5/1
    plots.plot_predictions_1d(targets, targets, preds, [2.0], tmp_path / "p.png", names=("u0", "u"), title="T")
    fig, suptitle = figures[0]
    assert suptitle == "T"
    assert [ax.get_title() for ax in fig.axes] == ["sample 0: relative L2 2.00e-01", "sample 0: error",
                                                   "sample 1: relative L2 1.50e+00", "sample 1: error"]
    assert list(fig.axes[0].get_lines()[0].get_xdata()) == [0.0, 1.0]  # x = i L / n on the periodic grid
    for i, ax in enumerate(fig.axes[1::2]):
        error = ax.get_lines()[0]
        assert list(error.get_xdata()) == [0.0, 1.0]
        assert torch.equal(torch.as_tensor(error.get_ydata()), (preds - targets)[i, :, 0])
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["u0, u", "u: prediction - truth"]
    _assert_laid_out(fig)


@pytest.mark.slow
def test_2d_truth_and_prediction_share_one_colour_scale_and_the_error_is_the_absolute_difference(tmp_path, figures):
    targets = torch.arange(6.0).reshape(1, 2, 3, 1) + 1
    preds = targets.clone()
    preds[0, 1, 2, 0] += 2  # the prediction reaches 8, above the truth's 6
    targets[0, 0, 0, 0] = -1  # the truth reaches -1, below the prediction's 1
    inputs = targets * 100
    plots.plot_predictions_2d(inputs, targets, preds, tmp_path / "p.png", names=("a", "u"))
    fig = figures[0][0]
    panels = [ax for ax in fig.axes if ax.get_title()]  # colour bars have no title
    assert [ax.get_title() for ax in panels[:3]] == ["sample 0: a", "sample 0: u (truth)", "sample 0: u (prediction)"]
    clims = [ax.get_images()[0].get_clim() for ax in panels]
    assert clims[0] == (-100.0, 600.0)
    assert clims[1] == clims[2] == (-1.0, 8.0)
    error = panels[3].get_images()[0].get_array()
    expected = (preds - targets)[0, ..., 0].abs().T
    assert error.shape == (3, 2) and torch.equal(torch.as_tensor(error.data), expected)
    assert clims[3] == (0.0, 2.0)
    assert [ax.get_ylabel() for ax in _colour_bars(fig)] == ["a", "u (truth and prediction)", "|u prediction - truth|"]
    _assert_laid_out(fig)


@pytest.mark.slow
def test_rollout_frames_pick_evenly_spaced_times_on_the_truths_colour_scale_with_a_bar_per_column(tmp_path, figures):
    truth = torch.arange(9.0).reshape(9, 1, 1, 1).expand(9, 2, 2, 1).clone()
    truth[:, 0, 0, 0] -= 1  # frame f spans [f - 1, f]
    plots.plot_rollout_frames(truth, truth + 100, [0.5 * i for i in range(9)], tmp_path / "f.png", columns=3,
                              name="w")
    fig = figures[0][0]
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["truth, t = 0", "truth, t = 2", "truth, t = 4",
                                                 "prediction, t = 0", "prediction, t = 2", "prediction, t = 4"]
    for ax in panels:
        image = ax.get_images()[0]
        frame = float(ax.get_title().split("= ")[1]) * 2
        assert image.get_clim() == (frame - 1, frame)  # the truth's range, also for the prediction
    _assert_laid_out(fig)
    bars = _colour_bars(fig)
    assert len(bars) == 3 and [ax.get_xlabel() for ax in bars] == ["w"] * 3
    for column, bar in enumerate(bars):  # under its column, on its column's scale
        assert bar.get_xlim() == panels[column].get_images()[0].get_clim()
        below, above = bar.get_position(), panels[column + 3].get_position()
        assert below.y1 < above.y0 and above.x0 <= below.x0 + below.width / 2 <= above.x1


def test_rollout_errors_are_labelled(tmp_path, figures):
    plots.plot_rollout_errors([0.1, 0.2], [0.1, 0.3], tmp_path / "e.png")
    fig = figures[0][0]
    assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == ("time", "relative L2 (mean over trajectories)")
    _assert_laid_out(fig)


def test_frame_image_of_a_3d_field_is_its_middle_slice():
    field = torch.arange(2 * 3 * 4 * 2.0).reshape(2, 3, 4, 2)
    assert torch.equal(plots._frame_image(field), field[:, :, 2, 0])


@pytest.mark.slow
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


@pytest.mark.slow
def test_rollout_frames_error_row_is_the_absolute_difference_on_one_scale(tmp_path, figures):
    truth = torch.arange(3.0).reshape(3, 1, 1, 1).expand(3, 2, 2, 1).clone()
    pred = truth.clone()
    pred[2, 1, 0, 0] += 4  # the largest error shown: 4, at the last frame
    pred[0, 0, 1, 0] -= 1
    plots.plot_rollout_frames(truth, pred, [0.0, 1.0, 2.0], tmp_path / "f.png", columns=3, name="w", error=True)
    fig = figures[0][0]
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels[6:]] == ["|error|, t = 0", "|error|, t = 1", "|error|, t = 2"]
    for frame, ax in enumerate(panels[6:]):
        image = ax.get_images()[0]
        assert image.get_clim() == (0.0, 4.0)
        assert torch.equal(torch.as_tensor(image.get_array().data), (pred - truth)[frame, ..., 0].abs().T)
    assert [ax.get_xlabel() for ax in _colour_bars(fig)] == ["w"] * 3 + ["|w prediction - truth|"]
    _assert_laid_out(fig)
