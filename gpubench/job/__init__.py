"""The user's own job: the marks and steps it writes (marks, imported by the job itself: nothing else
loads with it), the child process it runs as (child), a watch over it (watching), its phases summarised
(phases) and the `watch` command with the in-process recording() (watch). For a job nobody changed: the
bootstrap its Python processes load (bootstrap/) with the optimizer hook (autohook) and the one step it
counts (onestep), phases from what its GPU did (activity), and where each number came from (provenance)."""
