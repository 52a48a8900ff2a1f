"""What a run's rounds can say, before any statistic is taken of them: how finely the timer resolved them,
and which rounds timed the host instead of the GPU.

The timer's step. CUDA events tick in steps (32 ns on an H100 and an H200; CUDA documents about 0.5 us), so a
round's time per call comes in steps of tick / calls per round. A 6 us call timed one per round after an L2
flush reads 5.856, 5.888, ... 6.208 us: half a percent a step. Within one run its quartiles then sit on one
step, every bootstrap resample gives the same value, and the interval has no width, though the run could
not tell 6.208 from 6.230 us. So an interval is never narrower than the step: timer_step finds it in the
rounds themselves (the least difference between two distinct round times) and resolution_pct says it as a
share of the median.

Rounds the host was late for. Every round starts behind a blocking kernel (the clock's lead) long enough
for the host to queue the round's calls; a host held up longer than that (another thread holding the GIL,
the OS, a collection) leaves the GPU idle inside the timed events, and the round reads long by the delay:
rounds of 650 us against a 14 us median. The clock notes each round whose launches ended after its lead
could have, and such rounds are left out of the statistics while they are a few (MAX_LATE_SHARE): when
most rounds are late, the call itself waits on the host, and that is what it costs.
"""

from __future__ import annotations

from gpubench.stats import quantile

MAX_LATE_SHARE = 0.1  # late rounds are left out while they are at most this share of a run's rounds
DOCUMENTED_STEP_S = 0.5e-6  # cudaEventElapsedTime's resolution as CUDA documents it, where rounds cannot show theirs
DISTINCT = 1e-6  # round times closer than this share of the median are one value (float rounding), not two steps


def timer_step(rounds: list[float], calls: int = 1) -> float:
    """The least difference between two distinct round times (seconds per call): the timer's step, or less.
    Rounds that all read one value show no step; CUDA's documented resolution over the calls per round
    stands for it then."""
    if not rounds:
        return 0.0
    values = sorted(set(rounds))
    gap = DISTINCT * quantile(rounds, 0.5)
    steps = [b - a for a, b in zip(values, values[1:]) if b - a > gap]
    if steps:
        return min(steps)
    return DOCUMENTED_STEP_S / max(calls, 1)


def resolution_pct(rounds: list[float], calls: int = 1) -> float:
    """One timer step as a percentage of the rounds' median: no statistic of them is known more finely."""
    if not rounds:
        return 0.0
    return 100 * timer_step(rounds, calls) / quantile(rounds, 0.5)


def late_rounds(info: dict, n: int) -> list[int]:
    """The indices of the rounds the host was late for, as extra_info records them (rounds_host_late)."""
    late = info.get("rounds_host_late") if isinstance(info, dict) else None
    if not isinstance(late, list):
        return []
    return sorted({i for i in late if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n})


def usable(rounds: list[float], info: dict) -> list[float]:
    """The rounds a verdict uses: all of them but the late ones, while those are few (at most MAX_LATE_SHARE)."""
    late = late_rounds(info, len(rounds))
    if not late or len(late) > MAX_LATE_SHARE * len(rounds):
        return list(rounds)
    skip = set(late)
    return [x for i, x in enumerate(rounds) if i not in skip]
