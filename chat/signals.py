"""What the chat app tells others (the audit trail listens), so that chat never imports them.

Both are sent with ``send_robust``: a receiver that fails is logged by the sender and never
fails the answer or the vote.
"""

from django.dispatch import Signal

# An answer was given, withheld, refused as not covered, timed out or failed after validation:
# ``record`` is a plain dict (see ``chat.answering.audit_record``).
answered = Signal()

# A reader voted on an answer: ``answer_id`` (UUID), ``rating`` ("up"/"down"), ``comment``.
feedback_given = Signal()
