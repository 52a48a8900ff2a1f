"""Waiting for a module to be imported: a finder put first on sys.meta_path that finds nothing itself, lets the
other finders find the module it waits for, and has that module's loader call back once the module has run
(gpubench.inside.autohook waits so for torch's optimizers, gpubench.inside.jaxhook for jax). Nothing is
imported here, and a process that never imports the module is left as it was.

The callback runs inside the job's import of the module, under the import lock Python holds for it, after the
module's own code ran and once the finder has left sys.meta_path (a finder waits for one import). The module is
in sys.modules by then, so the callback may import it again, or other modules, without coming back here.

Nothing here may raise into, block or slow the job: a failure while looking goes to the hook's `failed`, and
the import goes on through the other finders as if the finder were not there; the callback catches everything
itself.
"""

from __future__ import annotations

import sys


class Finder:
    """Finds nothing itself: lets the other finders find `name`, and calls then(module) after its module ran;
    failed(err) where looking for it raised (the import then goes on without the finder)."""

    def __init__(self, name: str, then, failed):
        self.name, self.then, self.failed = name, then, failed

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None and spec.loader is not None:
                    self._follow(spec)
                    return spec
        except Exception as err:  # noqa: BLE001
            self.failed(err)
        return None

    def _follow(self, spec) -> None:
        """Make the loader call back once the module has run."""
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            leave(self.name)
            self.then(module)

        try:
            loader.exec_module = exec_module  # on this loader object only: the module keeps its own loader
        except (AttributeError, TypeError):
            spec.loader = _Loader(loader, exec_module)


def waiting(name: str) -> bool:
    """Whether a finder already waits for `name` (one is enough)."""
    return any(isinstance(f, Finder) and f.name == name for f in sys.meta_path)


def leave(name: str) -> None:
    """Take the finders that wait for `name` off sys.meta_path (those waiting for other modules stay)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not (isinstance(f, Finder) and f.name == name)]


class _Loader:
    """A loader whose exec_module cannot be replaced, wrapped: the replacement runs, the rest is its own."""

    def __init__(self, loader, exec_module):
        self._loader, self.exec_module = loader, exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)
