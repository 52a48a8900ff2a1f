"""The user's own job: the marks and steps it writes (marks, imported by the job itself: nothing else
loads with it), the child process it runs as (child), a watch over it (watcher), its phases summarised
(phases, each row in phaserow), the rank that holds the others back (slowrank) and the `watch` command
(watchcmd) with the in-process recording() (inprocess). For a job nobody changed: the bootstrap its Python
processes load (bootstrap/) with the optimizer hook (autohook) and the one step it counts (onestep), phases
from what its GPU did (activity), and where each number came from (provenance)."""
