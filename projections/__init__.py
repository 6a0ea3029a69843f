"""projections package (grows in its own issue)."""
