"""Read-only admin for what indexing stored: books, pages, passages and index runs (uploads: ``upload_admin``),
and on each user's page the books they are restricted to (``ingestion.roles``).

Indexing is the only writer (``manage.py ingest`` or an upload), so every field here is
read-only; deleting a book (and with it its pages and passages) is still allowed. A restricted
staff member sees (and may delete) only their books' rows.
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.utils.html import format_html

from bookchat.base.conf import setting
from ingestion.models import Book, BookAccess, Chunk, DefaultBook, Document, IndexRun
from ingestion.roles import BookScopedAdmin
from ingestion.uploads import admin as upload_admin  # noqa: F401  (registers the upload jobs' admin)

BY_BOOK = ("book", admin.RelatedOnlyFieldListFilter)  # lists only the books the user's rows are in


class ReadOnlyAdmin(BookScopedAdmin, admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]


def _pretty_json(value) -> str:
    return format_html("<pre style='white-space:pre-wrap'>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


@admin.register(Book)
class BookAdmin(ReadOnlyAdmin):
    book_lookup = "pk"
    list_display = ("slug", "title", "is_default", "document_count", "chunk_count", "embedder_name", "updated_at")
    search_fields = ("slug", "title", "source_path")
    list_filter = ("embedder_name",)
    actions = ["make_default"]

    def get_queryset(self, request):
        # The default in force, read once per list (BOOKCHAT_DEFAULT_BOOK, else the stored one).
        default = Q(slug=DefaultBook.in_force() or "")
        return super().get_queryset(request).with_counts().annotate(
            default=ExpressionWrapper(default, output_field=BooleanField()))

    @admin.display(boolean=True, ordering="-default", description="default")
    def is_default(self, obj: Book) -> bool:
        return obj.default

    def has_default_permission(self, request) -> bool:
        return request.user.has_perm("ingestion.change_defaultbook")

    @admin.action(description="Make the selected book the default book", permissions=["default"])
    def make_default(self, request, queryset) -> None:
        """The book asked when a request names none, for every process (``DefaultBook``)."""
        books = list(queryset[:2])
        if len(books) != 1 or books[0].edition_of_id:
            self.message_user(request, "Select one book (not a version or translation of one) to make it the "
                              "default.", messages.ERROR)
            return
        book = books[0]
        DefaultBook.choose(book.slug, by=f"admin: {request.user.get_username()}")
        self.log_change(request, book, "Made the default book.")
        note = (f" BOOKCHAT_DEFAULT_BOOK={setting('DEFAULT_BOOK')} is set in this server's environment and wins "
                "over it." if setting("DEFAULT_BOOK") and setting("DEFAULT_BOOK") != book.slug else "")
        self.message_user(request, f"{book} is the default book: the one asked when a request names none.{note}",
                          messages.WARNING if note else messages.SUCCESS)

    @admin.display(ordering="document_count", description="pages")
    def document_count(self, obj: Book) -> int:
        return obj.document_count

    @admin.display(ordering="chunk_count", description="passages")
    def chunk_count(self, obj: Book) -> int:
        return obj.chunk_count


@admin.register(Document)
class DocumentAdmin(ReadOnlyAdmin):
    list_display = ("path", "title", "book", "category", "link", "indexed_at")
    list_filter = (BY_BOOK, "category")
    search_fields = ("path", "title", "slug")
    list_select_related = ("book",)
    exclude = ("front_matter", "links_to")

    def get_readonly_fields(self, request, obj=None):
        return [*(f for f in super().get_readonly_fields(request, obj) if f not in self.exclude),
                "front_matter_json", "links_to_json"]

    @admin.display(description="front matter")
    def front_matter_json(self, obj: Document) -> str:
        return _pretty_json(obj.front_matter)

    @admin.display(description="links to")
    def links_to_json(self, obj: Document) -> str:
        return _pretty_json(obj.links_to)

    @admin.display(description="URL")
    def link(self, obj: Document) -> str:
        return format_html("<a href='{}'>{}</a>", obj.url, obj.url)


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ("heading_path", "document", "ordinal", "token_count", "continued")
    list_filter = (BY_BOOK, "continued", "document__category")
    search_fields = ("heading_path", "text", "id")
    list_select_related = ("document", "document__book")
    exclude = ("embedding", "search_vector")

    def get_readonly_fields(self, request, obj=None):
        hidden = {"embedding", "search_vector"}
        return [f for f in super().get_readonly_fields(request, obj) if f not in hidden]


@admin.register(IndexRun)
class IndexRunAdmin(ReadOnlyAdmin):
    list_display = ("book", "status", "trigger", "started_at", "total_seconds", "chunks_embedded", "files_failed")
    list_filter = ("status", "trigger", BY_BOOK)
    search_fields = ("source", "book__slug")
    date_hierarchy = "started_at"
    exclude = ("report",)

    def get_readonly_fields(self, request, obj=None):
        return [*(f for f in super().get_readonly_fields(request, obj) if f != "report"), "report_json"]

    @admin.display(description="report")
    def report_json(self, obj: IndexRun) -> str:
        return _pretty_json(obj.report)


# -- who may see which books: on each user's page ------------------------------------------------------------------
class BookAccessInline(admin.StackedInline):
    model = BookAccess
    can_delete = True
    verbose_name = "restricted to books"
    verbose_name_plural = "restricted to books (none: every book)"
    filter_horizontal = ("books",)
    extra = 0

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "books":
            kwargs["queryset"] = Book.objects.roots().order_by("slug")  # editions come with their book
        return super().formfield_for_manytomany(db_field, request, **kwargs)


User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class StaffUserAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, BookAccessInline]
