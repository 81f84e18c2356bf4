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
