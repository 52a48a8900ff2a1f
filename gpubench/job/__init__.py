"""The user's own job: the marks and steps it writes (marks, imported by the job itself: nothing else
loads with it), the child process it runs as (child), a watch over it (watching), its phases summarised
(phases) and the `watch` command with the in-process recording() (watch)."""
