"""The hand-off API: a student hands an answer to the course staff and reads back what the staff did with it
(``views``: ``POST /answers/{answer_id}/handoff``, ``GET /handoffs/{token}``, ``GET /handoff-form``), the chat page's
form for the same without JavaScript and the readable status page (``pages``), the contract (``contract``: the
request, the replies as the schema states them) and the per-conversation limit (``limits``); ``urls`` gives the
routes, which the project mounts (the API under ``/api/v1/``, the page's form beside the chat page).

It calls the hand-off services (``audit.handoffs``). Audit stands above chat, so it uses chat's channels as they
are: who is calling (``chat.channels.access``: a publishable key with CORS for the widget, the page's session, a
secret key, anonymous where allowed), the limits' counters (``chat.channels.throttling``), the one error body
(``chat.channels.error_responses``, the project's exception handler) and the strict JSON body
(``chat.channels.parsers``). Chat never imports it: the page reaches these routes by their URL names and paths.
"""
