"""The generated numbers of the README and of the documentation site, written from results/."""
