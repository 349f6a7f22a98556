"""LTI 1.3: students and course staff arrive from their course's LMS (Canvas, Moodle, Blackboard, D2L).

Built on django-lti (``lti_tool``: its registrations, deployments, keys, ``rotate_keys`` and ``LtiLaunch``) and the
pylti1p3 message launch under it, with what the issue left to us decided here:

- **No cookie before the launch.** django-lti keeps OIDC state in a cookie and nonces in Django's cache (a per-process
  LocMem cache here). We keep both in the database (``LaunchRecord``), keyed by the state the platform posts back, and
  take the state once: a replayed launch finds none. So the launch works in a frame that may keep no cookie at all.
- **After it, partitioned cookies (CHIPS).** A launched session's cookies are sent ``SameSite=None; Secure;
  Partitioned`` (``framing``): Chromium keeps them inside the LMS's frame with third-party cookies blocked, and they
  are never seen outside that LMS. A browser without CHIPS can open the launch in a new window (the LMS's own option).
- **Nothing kept of who a student is.** The learner is a pseudonym: HMAC-SHA256 of issuer and subject under a key of
  its own in the database (``LearnerKey``: ``backup`` carries it, rotating ``SECRET_KEY`` never re-keys anyone).
  django-lti's ``LtiUser`` keeps no name, e-mail or picture unless the platform's registration turns it on
  (``LtiPlatform.keep_identity``).
- **The book:** the deep link's custom parameter ``book`` (and ``chapter``), else the platform's book. A platform bound
  to a book launches only that one.
- **Refused launches store nothing:** every check (state, nonce, signature, audience, issuer, deployment, message type,
  version, roles, the book) runs before any row is written; django-lti's own launch view would create an unknown
  deployment and save the user's claims first, so ours does not use it.
"""
