"""The reference runs on a GPU, and committed run directories summarized again or copied to CSV."""
