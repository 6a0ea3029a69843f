"""The locomo suite's read side: LoCoMo's own grading and retrieval metrics (docs/locomo.md).

Not yet registered as a suite: ``grading`` is the pure decision over a prediction, a gold
answer and the dialogue ids retrieved.
"""
