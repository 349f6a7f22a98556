"""``manage.py bench``: speed, scale and quality of bookchat, measured on this machine and written to
BENCHMARKS.md (between its ``bench:start``/``bench:end`` markers; the text around them is kept).

Every figure comes from the code paths users hit: ``index_book`` for ingestion, the answering
pipeline (audit write included) in-process, and gunicorn over loopback HTTP. Nothing here is
asserted by the test suite.
"""
