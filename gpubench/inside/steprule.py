"""What one step is where a job's optimizers step at different rates: one iteration of its loop, found from
the order in which they step. gpubench.inside.autohook hands Rule.step() each optimizer step (the outermost
one, as a small key) and writes a step where it answers True; nothing here knows torch or files, so the rule
is tested on sequences of keys alone.

A pattern is the repeating sequence of which optimizer steps (a WGAN's five critic steps and one generator
step: C C C C C G), and each whole pattern is one step, ended by the last step of its rarest optimizer (its
anchor). The FLOP count (gpubench.inside.onestep) is taken from the end of one pattern to the end of the next,
so a step's FLOPs are always those of its own pattern, never a whole iteration's given to each step of one
optimizer. How the pattern is found, and what is written until it is:

- One optimizer (gradient accumulation too): each of its steps is a step, from the first, as always.
- A second optimizer steps after at most MAX_RUN steps of the first: those were the first iteration of a
  pattern of both, and it ends now (C C C C C then G: one step, at G). The steps already written for the
  first optimizer are taken back (`back` in news: the reader drops them), so the count of steps is the count
  of iterations from the first. MAX_RUN is below onestep.COUNT_AFTER: no count was taken in them.
- Each later optimizer step is checked against the pattern (one comparison). One that breaks it (a step
  that raised, so its post-hook never came; a critic given 100 steps once in a while; an optimizer that
  joined or left) starts learning again, while the steps of the old pattern's anchor still end steps (every
  k-th, where it steps k times a pattern), so a step still ends where an iteration ends.
- Learning: a pattern is settled once the last max(2q, MAX_PERIOD + q) optimizer steps repeat with period
  q <= MAX_PERIOD (no shorter period can pass that by chance: Fine and Wilf), and it holds every optimizer
  that stepped since learning began and is not gone (garbage-collected, or silent for GONE steps of the
  others), the old anchor included. Settling on the pattern it had is no news; another is news, and the
  hook writes it (a P line) and counts that pattern's FLOPs anew.
- Where the old anchor is gone, nothing ends a step until a pattern is settled: no step is better than a
  wrong one.

Work at each optimizer step: O(1) while the pattern holds, O(MAX_PERIOD) while learning; memory is fixed
(a ring of the last 2 x MAX_PERIOD keys, a counter per period, the last step of each optimizer alive).
"""

from __future__ import annotations

MAX_PERIOD = 16  # the longest pattern found, in optimizer steps
MAX_RUN = 9  # steps of one optimizer before a second's first that are taken as one iteration of both
GONE_MIN, GONE_PER = 64, 32  # an optimizer silent for max(GONE_MIN, GONE_PER x the pattern's length) steps is gone
RING = 2 * MAX_PERIOD
SET, RELEARN, LEARN = "set", "relearn", "learn"  # a pattern holds; learning, the old anchor ending steps; learning


def least_rotation(keys: tuple) -> tuple:
    """The same pattern whichever of its steps it was found at."""
    return min(keys[i:] + keys[:i] for i in range(len(keys))) if keys else keys


def counts(pattern: tuple) -> list[tuple]:
    """(key, steps in the pattern), in the order each key first steps in it."""
    out: dict = {}
    for k in pattern:
        out[k] = out.get(k, 0) + 1
    return list(out.items())


class Rule:
    """Which optimizer steps end a step. `news` is set, once, where the pattern changed: (pattern, back), the
    pattern's keys in order (its last ends a step) and how many steps written before are taken back."""

    def __init__(self, alive=None):
        self.alive = alive or (lambda key: True)  # whether an optimizer still exists
        self.mode = None  # none yet; SET, RELEARN or LEARN
        self.pattern: tuple = ()  # the pattern now (or last) counted
        self.canon: tuple = ()  # its least rotation
        self.pos = 0  # the place in the pattern of the next step
        self.anchor, self.k, self.j = None, 1, 0  # while learning: the old anchor, its steps a pattern, since
        self.streak, self.streak_out = 0, 0  # steps of one optimizer in a row, and of those, steps written
        self.before = (0, 0)  # the same of the optimizer that stepped before this one
        self.ring: list = [None] * RING
        self.t = 0  # optimizer steps seen
        self.run = [0] * (MAX_PERIOD + 1)  # run[q]: the last steps that repeat the one q before them, in a row
        self.since = 0  # where learning began
        self.last: dict = {}  # each optimizer's last step
        self.news: tuple | None = None

    def step(self, key) -> bool:
        """One optimizer step (its key); True where it ends a step."""
        t = self.t
        self.t = t + 1
        self.ring[t % RING] = key
        last = self.last.get(key)
        self.last[key] = t
        if last is not None and last == t - 1:
            self.streak += 1
        else:
            self.before, self.streak, self.streak_out = (self.streak, self.streak_out), 1, 0
            if len(self.last) > 4 * MAX_PERIOD:
                self._forget(t)
        ends = self._step(key, t)
        self.streak_out += ends
        return ends

    def _step(self, key, t: int) -> bool:
        mode, pattern = self.mode, self.pattern
        if mode is SET:
            pos = self.pos
            if key == pattern[pos]:
                pos += 1
                self.pos = 0 if pos == len(pattern) else pos
                return pos == len(pattern)
            run, written = self.before
            if len(pattern) == 1 and run <= MAX_RUN:
                # a second optimizer after a few steps of the first: one iteration of both ends here
                self._settle((pattern[0],) * run + (key,), 0, written)
                return True
            self._learn(t, self._fallback(pattern))
        elif mode is None:
            self.mode, self.pattern, self.canon, self.pos = SET, (key,), (key,), 0
            return True
        return self._learning(key, t)

    def _fallback(self, pattern: tuple):
        """The old pattern's anchor and its steps a pattern, and how many of them since it last ended."""
        anchor = pattern[-1]
        k = pattern.count(anchor)
        return anchor, k, pattern[: self.pos].count(anchor)

    def _learn(self, t: int, fallback) -> None:
        self.mode = RELEARN if fallback else LEARN
        self.anchor, self.k, self.j = fallback or (None, 1, 0)
        self.since = t
        self.run = [0] * (MAX_PERIOD + 1)

    def _learning(self, key, t: int) -> bool:
        ends = False
        anchor = self.anchor
        if anchor is not None:
            if key == anchor:
                self.j += 1
                if self.j >= self.k:
                    self.j, ends = 0, True
            elif not self.alive(anchor) or t - self.last.get(anchor, -t) > self._gone():
                self.mode, self.anchor = LEARN, None  # it left: no step until a pattern is settled
        ring, run, found = self.ring, self.run, 0
        for q in range(1, min(MAX_PERIOD, t) + 1):
            n = run[q] = run[q] + 1 if ring[(t - q) % RING] == key else 0
            if n >= MAX_PERIOD and not found and self._holds(q, t):  # n >= q too: q <= MAX_PERIOD
                found = q
        if found:
            return self._place(tuple(ring[(t - found + 1 + i) % RING] for i in range(found))) or ends
        return ends

    def _gone(self) -> int:
        return max(GONE_MIN, GONE_PER * len(self.pattern))

    def _holds(self, q: int, t: int) -> bool:
        """Whether the last q steps hold the old anchor and every optimizer that stepped since learning began."""
        window = {self.ring[(t - i) % RING] for i in range(q)}
        if self.anchor is not None and self.anchor not in window:
            return False
        gone = self._gone()
        return all(k in window for k, s in self.last.items() if s >= self.since and t - s <= gone and self.alive(k))

    def _place(self, window: tuple) -> bool:
        """Settle on the pattern of these last steps; True where the step now ends one."""
        fewest = min(n for _, n in counts(window))
        rare = {k for k, n in counts(window) if n == fewest}
        anchor = self.anchor if self.anchor in rare else next(k for k in reversed(window) if k in rare)
        end = len(window) - 1 - window[::-1].index(anchor)
        self._settle(window[end + 1 :] + window[: end + 1], len(window) - 1 - end, 0)
        return self.pos == 0

    def _settle(self, pattern: tuple, pos: int, back: int) -> None:
        canon = least_rotation(pattern)
        if canon != self.canon or back:
            self.news = (pattern, back)
        self.mode, self.pattern, self.canon, self.pos = SET, pattern, canon, pos
        self.anchor = None

    def _forget(self, t: int) -> None:
        """Keep the last step of those optimizers alone that may still matter."""
        gone = self._gone()
        self.last = {k: s for k, s in self.last.items() if t - s <= gone and self.alive(k)}


def describe(pattern: tuple, names: dict) -> str:
    """A pattern in words, "5 × Adam #1, 1 × Adam #2": each optimizer's steps in it, by its class name (names:
    key -> class name), numbered where two share one."""
    found = counts(pattern)
    labels = [names.get(k, "optimizer") for k, _ in found]
    seen: dict = {}
    out = []
    for (_, n), label in zip(found, labels):
        if labels.count(label) > 1:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label} #{seen[label]}"
        out.append(f"{n} × {label}")
    return ", ".join(out)
