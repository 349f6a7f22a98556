"""What the chat app tells others (the audit trail listens), and asks them, so that chat never imports them.

All are sent with ``send_robust``: a receiver that fails is logged by the sender and never
fails the answer or the vote.
"""

from django.dispatch import Signal

# An answer was given, withheld, refused as not covered, timed out or failed after validation, or (status
# ``searched``) an assistant searched a book (``chat.searching``): ``record`` is a plain dict
# (see ``chat.answering.send_audit``).
answered = Signal()

# A reader voted on an answer: ``answer_id`` (UUID), ``rating`` ("up"/"down"), ``comment``.
feedback_given = Signal()

# ``/api/v1/health`` asks the other parts how they are: each receiver returns ``{name: report}`` (the audit
# trail: ``{"audit": {"write_failures": …}}``), shown beside the database and embedder checks.
health_requested = Signal()
