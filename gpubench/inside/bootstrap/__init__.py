"""The directory `gpubench watch` puts first on the watched command's PYTHONPATH, as opentelemetry-instrument
and ddtrace-run do: it holds only sitecustomize.py, which Python imports at start-up (gpubench.job.autohook
says what it installs). BOOTSTRAP is its path."""

import os

BOOTSTRAP = os.path.dirname(os.path.abspath(__file__))


def prepare(env: dict, on: bool = True) -> dict:
    """Put the bootstrap first on the command's PYTHONPATH in `env` (on), or turn the hook off there; what
    was done, for the manifest."""
    from gpubench.job import autohook

    if not on:
        env[autohook.ENV] = "0"
        return {"hook": "off", "why": "--no-auto"}
    env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP, *filter(None, [env.get("PYTHONPATH")])])
    if not autohook.enabled(env):
        return {"hook": "off", "why": f"{autohook.ENV}={env.get(autohook.ENV)} in the command's environment"}
    counting = env.get(autohook.ENV, "1").strip().lower() != "steps"
    return {"hook": "on", "bootstrap": BOOTSTRAP, "flops": "one step counted" if counting else "not counted"}
