import os

from hypothesis import HealthCheck, settings

# Property tests are derandomised: CI and every developer see the same examples.
settings.register_profile("mdtheory", derandomize=True, max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mdtheory"))
