"""The weekly expert review (tier 3); its models arrive with the review issue."""
