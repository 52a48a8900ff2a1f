"""Showing a run: the terminal's tables and progress (console), the figures (figures/, one module per
figure) and the report, all from a run directory's files alone; `gpubench plot` and `report` (render)."""
