import functools
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Property tests are derandomised: CI and every developer see the same examples.
settings.register_profile("mdtheory", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mdtheory"))


@pytest.fixture
def npy(tmp_path):
    """``npy(name, array)`` saves the array under tmp_path and returns the path as a string."""
    def save(name, arr):
        path = tmp_path / name
        np.save(path, np.asarray(arr))
        return str(path)
    return save


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "char_lstm: needs the pretrained char-LSTM (textgenrnn's data files and h5py); "
        "skipped without it, the skip naming what is missing")


@functools.cache
def char_lstm_missing() -> str | None:
    """Why the pretrained char-LSTM cannot be read (textgenrnn's data files or h5py), or None."""
    from mdtheory.errors import MdtheoryError
    from mdtheory.language import lm

    try:
        lm.textgenrnn_files()
        import h5py  # noqa: F401
    except (MdtheoryError, ImportError) as exc:
        return f"the pretrained char-LSTM cannot be read: {exc}"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("char_lstm") is not None and char_lstm_missing() is not None:
            item.add_marker(pytest.mark.skip(reason=char_lstm_missing()))


@pytest.fixture(autouse=True)
def no_progress_lines(monkeypatch):
    """Off a terminal a command prints a progress line every :data:`mdtheory._progress.INTERVAL`
    seconds of wall clock; on a loaded machine a test's command can take that long, and a test that
    compares stderr would then see the line. The tests of those lines set the interval themselves."""
    from mdtheory import _progress

    monkeypatch.setattr(_progress, "INTERVAL", math.inf)
