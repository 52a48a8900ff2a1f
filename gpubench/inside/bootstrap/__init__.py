"""The directory `gpubench watch` puts first on the watched command's PYTHONPATH, as opentelemetry-instrument
and ddtrace-run do: it holds only sitecustomize.py, which Python imports at start-up (gpubench.inside.autohook
says what it installs). BOOTSTRAP is its path; gpubench.job.hookenv puts it there."""

import os

BOOTSTRAP = os.path.dirname(os.path.abspath(__file__))
