"""Jobs watched on a GPU (the examples, jobs nobody changed, the hooks' cost, the live window) and their tables."""
