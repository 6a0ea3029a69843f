"""Test data: the golden runs and their generator, and the bad inputs (``bad``)."""
