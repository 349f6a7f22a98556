"""What the privacy pages say besides the inventory's tables, written once for the manual's page (``manual``) and the
served one (``views``): what leaves the server, what the browser sends and keeps, how a learner's rights map to the
commands, and what an erasure does to backups. Plain text with `code` spans; each entry is a paragraph."""

from __future__ import annotations

INTRO = (
    "bookchat keeps no learner's name: a reader is a conversation (a random id the browser keeps) and, when an LMS "
    "launched the page, a pseudonym (a keyed hash of the LMS's user id). What it keeps is the learner's words: "
    "questions, selected passages, feedback comments, notes to the course staff. Everything below is generated "
    "from the code's own declaration (`audit/privacy/inventory.py`), which a test keeps complete.")

OUTBOUND = [
    "With a language model configured (`BOOKCHAT_LLM_BASE_URL`), each question sends the model server only the "
    "question, the passage the reader selected, the earlier turns of the conversation and the book's passages it "
    "answers from, with bookchat's instructions. Never an identity, a pseudonym, an IP address, a conversation id "
    "or an API key of the reader: a test inspects the request the model server receives.",
    "With embeddings from a server (`BOOKCHAT_EMBEDDING_BACKEND=openai`), the question (and a selected passage) is "
    "sent to that server to be embedded; the default embedder runs inside bookchat and sends nothing.",
    "E-mail to the course staff about new hand-offs (`BOOKCHAT_HANDOFF_EMAIL_MINUTES`) lists them with links to the "
    "admin; the staff read the question there.",
    "Nothing is sent to anyone else: no analytics, no third-party scripts or fonts.",
]

BROWSER = [
    "The widget on a docs site sends bookchat the question, the passage the reader selected, the page's language, "
    "the conversation's `session_id` once there is one, and its site's publishable key; feedback, hand-offs and "
    "searches as typed go the same way, without cookies.",
    "In the browser the widget keeps the conversation in `sessionStorage` (`bookchat:session:BOOK`: it ends with the "
    "tab) and the tokens of the reader's hand-offs in `localStorage` (`bookchat:handoffs:BOOK`), so that the staff's "
    "replies show on the next visit. It asks for its labels (`GET /api/v1/interface`) in the browser's languages, "
    "or in the one the reader picked with its language switch, which it keeps in `localStorage` "
    "(`bookchat:language`).",
    "The chat page keeps a session cookie (its conversations' ids and, after an LMS launch, the pseudonym, held on "
    "the server) and the same hand-off tokens in `localStorage`; a reader who picks a language with its switch gets "
    "a cookie that keeps it (`django_language`).",
    "\"My data\" under the chat page, and in the widget's footer, downloads (one JSON file), or deletes after a "
    "confirmation, the conversations and hand-offs of this browser (`POST /api/v1/my-data` and `POST "
    "/api/v1/my-data/erase`, sent the browser's own conversation ids and hand-off tokens: the page adds its "
    "session's, the widget sends its tab's conversation and the tokens it kept, with its publishable key); deleting "
    "them also makes the page or the widget forget the ids it kept. The widget's footer links to this page.",
]

# (the request, the law, what to run)
REQUESTS = [
    ("See what is held about them", "FERPA: inspect and review education records; GDPR article 15 (access)",
     "`manage.py privacy export --learner=ID --json` (with `=`: a hand-off token may start with `-`), or the "
     "admin's \"Export the learner's data\" action"),
    ("A copy to take elsewhere", "GDPR article 20 (portability)",
     "The same export: one JSON document"),
    ("Erase it", "GDPR article 17 (erasure); FERPA: a school's records policy",
     "`manage.py privacy erase --learner=ID` (asks first; `--yes` for scripts), or the admin's \"Erase the "
     "learner's data\" action"),
    ("Correct it", "FERPA: amendment; GDPR article 16 (rectification)",
     "bookchat keeps the learner's words as written and never edits them: erase them, and the learner asks again"),
    ("Stop the processing", "GDPR articles 18 and 21",
     "Erase, and remove bookchat from the course (an LMS launch is the only way a pseudonym is made)"),
    ("Who sees it", "FERPA: school official with a legitimate educational interest",
     "The course staff see questions, answers and hand-offs under a pseudonym (per-book roles limit them to their "
     "books); `/metrics` and the map of where students struggle show counts"),
]

FINDING = (
    "A learner is found by any of: their LMS pseudonym (32 hex characters; the staff see it on audit rows and "
    "hand-offs), a conversation id (the `session_id`), or a hand-off's token (the end of its status link). From "
    "one, bookchat finds the rest: a conversation's pseudonym brings the learner's other conversations.")

ERASURE = [
    "An erasure deletes the learner's conversations, turns, feedback, hand-offs (and the staff's replies to them) "
    "and LMS user record; on their audit rows, in the database and in the archives, it clears every text and "
    "link, and keeps the counts, timings, levels and sections, so that metrics and the map of where students "
    "struggle stay true (a row's conversation id is replaced by a new random one). Their questions leave the "
    "topics' examples. A staff answer written from their question stays (the staff's words) without the question: "
    "it waits for review until the staff write the question in their own words.",
    "Each erasure leaves a tombstone without personal data (SHA-256 hashes of the erased ids) in the data folder's "
    "`privacy/erasures.jsonl`, appended to, never rewritten. `manage.py backup` carries it; `manage.py restore` "
    "merges the backup's tombstones with the install's (never replaces them) and applies every tombstone again "
    "before the install serves, and says how many rows it erased again: an erased learner doesn't come back with "
    "an older backup.",
]
