"""A second factor for staff in the admin: an authenticator app (TOTP, django-otp) and single-use recovery codes.

Decisions:
- ``BOOKCHAT_ADMIN_2FA=optional`` (the default, so that `make run`'s first login needs only a password): any
  staff member may set up an app from the admin; ``required``: a staff user without one is sent to set it up
  before anything else. Either way, whoever has a confirmed app gives a code at every login.
- django-otp's ``OTPAdminSite`` is not used: it treats every unverified user as non-staff, which would lock out
  staff without an app in optional mode. The default admin site keeps its ``has_permission``; our login form
  (``login``) asks for the code and our middleware (``login``) enforces the rest on the admin's URLs.
- One "Authenticator code" field takes both kinds of code: six digits are tried on the app only, anything else
  on the recovery codes only, so that a recovery code never counts as a failed attempt on the app (django-otp
  throttles each device on its own: 1 s, 2 s, 4 s … after each wrong code).
- A refused code is a failed login (``user_login_failed``, which lockout counters such as django-axes count),
  as a wrong password is; the message says the code was wrong, as authenticator logins generally do.
- The pages (``pages``) live under ``/admin/twofactor/`` (wired before the admin's own URLs), so they get the
  admin's look, login and Content-Security-Policy; the QR code is inline SVG made on the server (``segno``).

Modules: ``devices`` (the writes and reads on django-otp's models), ``login`` (the login form and the
middleware), ``pages`` (the admin pages and their URLs).
"""
