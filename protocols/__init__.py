"""protocols package (grows in its own issue)."""
