"""Reading a recording: a window of sample rows summarised (medians and spread, work done against the
peaks) and judged (the verdict rules, as data). Pure functions over rows: no GPU, no files."""
