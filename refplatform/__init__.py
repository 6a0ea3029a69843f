"""refplatform package (grows in its own issue)."""
