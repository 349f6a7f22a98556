"""Each learner's data (issue 75): what bookchat holds that is personal (``inventory``, the one declaration the manual's
"Privacy and data" page and ``/privacy/`` are made from), finding a learner's rows (``learners``), exporting and
erasing them (``erasure``), the erasures' tombstones that survive a restore (``tombstones``), and the views of the
privacy page and of a student's "My data" (``views``).

Inside the audit app because it reads and rewrites the audit trail, its archives and chat's conversations (audit
stands above chat); the project wires the command, the admin actions and the routes.
"""
