"""replay package (grows in its own issue)."""
