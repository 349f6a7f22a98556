"""Signals other apps listen to, so that ingestion knows nothing of them."""

from django.dispatch import Signal

# Sent after an indexing run that changed a book's passages (or the first time it is indexed):
# ``sender`` is the Book class, ``book`` the book, ``report`` the IndexReport.
book_indexed = Signal()
