"""A synthetic long watch in gpubench's run-directory format, and what plotting and reporting it costs."""
