"""Research probes: each answered a question once; research/README.md says what each found, where its result
lives and when it goes."""
