"""Time layout of time models: frames <-> channels round trip and the one-line errors."""

from __future__ import annotations

import pytest
import torch

from opformer.errors import ConfigError, DataError
from opformer.models.time_layout import channels_to_frames, check_time_sizes, frames_to_channels


def test_frames_and_channels_round_trip():
    x = torch.randn(2, 5, 4, 3, 2)  # (batch, 2 spatial axes, 3 frames, 2 channels)
    merged = frames_to_channels(x, 2, 3, 2)
    assert merged.shape == (2, 5, 4, 6)
    torch.testing.assert_close(merged[..., 2:4], x[..., 1, :])  # frame-major: frame 1's channels come second
    torch.testing.assert_close(channels_to_frames(merged, 3), x)


def test_wrong_layouts_are_one_line_errors():
    x = torch.zeros(1, 4, 4, 3, 2)
    with pytest.raises(DataError, match=r"model expects \(batch, 3 spatial axes, time, channels\)"):
        frames_to_channels(x, 3, 3, 2)
    with pytest.raises(DataError, match="model built for t_in=2, got 3 input frames"):
        frames_to_channels(x, 2, 2, 2)
    with pytest.raises(DataError, match="model built for in_channels=1, got 2 channels"):
        frames_to_channels(x, 2, 3, 1)
    with pytest.raises(ConfigError, match="t_in, t_out, in_channels, out_channels must be >= 1, got 1, 0, 1, 1"):
        check_time_sizes(1, 0, 1, 1)
