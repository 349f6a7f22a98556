"""Signals other apps listen to, so that ingestion knows nothing of them."""

from django.dispatch import Signal

# Sent after every indexing run that wrote (not --dry-run), once its new version is stored and the book's lock
# released: ``sender`` is the Book class, ``book`` the book, ``report`` the IndexReport, ``changed`` whether any
# page was (re)indexed or removed, and ``trigger`` what ran it ("cli", "upload", "publish", …). The signal announces:
# a receiver queues the work it starts as a task (chat.receivers) and may put the task, or its result when it ran in
# this process, in ``report.after[name]`` (a dict): ``ingest`` prints it.
book_indexed = Signal()
