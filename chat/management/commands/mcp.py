"""``manage.py mcp [--book SLUG]``: the books as an MCP server over stdio, the local command a desktop assistant
(Claude Desktop, Cursor, VS Code) starts (the manual, "Use the book from your AI assistant").

stdout carries the protocol and nothing else: the SDK's ``stdio_server`` points fd 1 at stderr while it serves, and
every log line goes to stderr. Exit status: 0 when the assistant closes the connection, 1 when the server can't start
(an unknown book, no database). An embedded PostgreSQL that this process started is stopped when it ends, unless
another process (``make run``, a second assistant) is using it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from mcp.server.stdio import stdio_server

from bookchat.base import embedded_db
from chat.channels.access import AssistantClient
from chat.channels.mcp_server import book_server
from ingestion.models import Book


class Command(BaseCommand):
    help = "Serve the books to an AI assistant over MCP on stdin/stdout (logs go to stderr)."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--book", help="Answer from this book only (its slug); default: every indexed book.")

    def handle(self, *args, **options) -> None:
        try:
            self.serve(options["book"] or None)
        finally:
            if embedded_db.started_here:
                connections.close_all()
                if embedded_db.stop_if_unused(Path(settings.DATA_DIR)):
                    self.stderr.write("mcp: stopped the embedded PostgreSQL it had started.")

    def serve(self, slug: str | None) -> None:
        try:
            known = list(Book.objects.roots().order_by("slug").values_list("slug", flat=True))
        except Exception as exc:
            raise CommandError(f"mcp: the database is unavailable: {exc}") from exc
        if slug is not None and slug not in known:
            raise CommandError(f"mcp: there is no book {slug!r}; the books are: {', '.join(known) or 'none yet'}")
        server = book_server(AssistantClient(book=slug))

        async def serve() -> None:
            try:
                async with stdio_server() as (read_stream, write_stream):
                    await server.run(read_stream, write_stream, server.create_initialization_options())
            finally:  # the tools' database connection lives in asgiref's thread for sync code
                await sync_to_async(connections.close_all, thread_sensitive=True)()

        anyio.run(serve)
