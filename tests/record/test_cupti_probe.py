"""research/cupti_probe.py (its candidates in research/cupti/metrics.py) tries the counters the CUPTI source ships,
not a list of its own that drifts from it."""

from gpubench.record.sources.cupti_metrics import CANDIDATES, NOT_SHIPPED
from research.cupti.metrics import RAW, ROLES


def test_the_probe_tries_every_shipped_candidate_in_the_sources_order():
    for column, readings in CANDIDATES.items():
        single = [r.metrics[0] for r in readings if len(r.metrics) == 1]
        assert ROLES[column] == single
        for r in readings:
            if len(r.metrics) > 1:
                assert set(r.metrics) <= set(RAW)  # a ratio's counters, tried one by one


def test_a_column_the_source_does_not_ship_is_still_searched_and_in_the_ladders_order():
    for column in NOT_SHIPPED:
        assert ROLES[column] and column not in CANDIDATES
    order = list(ROLES)
    assert order.index("tensor_active_pct") < order.index("dram_active_pct") < order.index("fp32_active_pct")
