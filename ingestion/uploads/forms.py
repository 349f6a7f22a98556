"""The admin's upload form: which book (and its language), which files, where in the book, and whether to prune.
Validating it checks the files (a zip read through in memory) and writes nothing; the admin stores them when it
saves the job (``ingestion.uploads.admin``)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from ingestion.languages import LanguageError, language_tag
from ingestion.models import Book, IngestionJob, book_slug_validator
from ingestion.uploads.intake import ZIP_SUFFIX, CheckedUpload, UploadError, check_upload, clean_folder


class MultipleFileInput(forms.FileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file input that takes several files; cleans to a list (Django's own FileField takes one)."""

    widget = MultipleFileInput

    def clean(self, data, initial=None):
        files = list(data) if isinstance(data, list | tuple) else ([data] if data else [])
        if not files:
            if self.required:
                raise ValidationError(self.error_messages["required"], code="required")
            return []
        return [super(MultipleFileField, self).clean(item, initial) for item in files]


class UploadForm(forms.ModelForm):
    new_book_slug = forms.CharField(
        label="…or a new book: slug", required=False, max_length=64, validators=[book_slug_validator],
        help_text="Lowercase letters, digits and inner hyphens, like 'my-book'. Leave the book above empty.",
    )
    new_book_title = forms.CharField(label="New book: title", required=False, max_length=300,
                                     help_text="Defaults to the slug.")
    upload = MultipleFileField(
        label="Files", allow_empty_file=True,
        widget=MultipleFileInput(attrs={"accept": ".md,.mdx,.zip"}),
        help_text="One or more .md/.mdx pages, or one .zip of a docs folder.",
    )

    class Meta:
        model = IngestionJob
        fields = ["book", "new_book_slug", "new_book_title", "language", "upload", "folder", "prune"]
        labels = {"folder": "Folder inside the book", "prune": "Remove pages that are not in this upload"}
        help_texts = {
            "book": "The book to upload into.",
            "language": "What the pages are written in, a BCP 47 tag (en, es, zh, pt-BR): it picks the book's text "
                        "search. Empty: the book's language as it is (a new book: en).",
            "folder": "Where the files go in the book, like 'using/' to replace using/01-ingest.md. "
                      "Empty: the book's root.",
            "prune": "Only for a .zip of the whole book (no folder): the book's pages missing from it are removed.",
        }

    checked: CheckedUpload | None = None  # the upload, once the form is valid
    allowed: QuerySet[Book] | None = None  # the uploader's books (``ingestion.roles``); None: every book, or a new one

    @classmethod
    def within(cls, books: QuerySet[Book] | None) -> type[UploadForm]:
        """The form for an uploader restricted to ``books`` (None: not restricted)."""
        return cls if books is None else type("RestrictedUploadForm", (cls,), {"allowed": books})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["book"].required = False
        self.fields["book"].queryset = Book.objects.roots().order_by("slug")
        self.fields["book"].empty_label = "— choose a book, or create one below —"
        if self.allowed is not None:
            self.fields["book"].queryset = self.fields["book"].queryset.filter(pk__in=self.allowed)
            self.fields["book"].empty_label = "— choose one of your books —"
            self.fields["new_book_slug"].help_text = "You may upload only into your books: ask an administrator " \
                                                     "for a new one."

    def clean_language(self) -> str:
        value = (self.cleaned_data.get("language") or "").strip()
        try:
            return language_tag(value) if value else ""
        except LanguageError as exc:
            raise ValidationError(exc.message) from None

    def clean_folder(self) -> str:
        try:
            return clean_folder(self.cleaned_data.get("folder", ""))
        except UploadError as exc:
            raise ValidationError(exc.message) from None

    def clean(self):
        data = super().clean()
        book, slug = data.get("book"), data.get("new_book_slug", "")
        if slug and self.allowed is not None:
            self.add_error("new_book_slug", "You may upload only into your books: choose one above, or ask an "
                                            "administrator to create the new book for you.")
        elif book and slug:
            self.add_error("new_book_slug", "Choose an existing book or give a new slug, not both.")
        elif not book and not slug and "new_book_slug" not in self.errors:
            self.add_error("book", "Choose the book to upload into, or give a slug for a new book.")
        elif slug and Book.objects.filter(slug=slug).exists():
            self.add_error("new_book_slug", f"A book with the slug '{slug}' exists already: choose it above.")
        files = data.get("upload") or []
        if data.get("prune") and (len(files) != 1 or not files[0].name.lower().endswith(ZIP_SUFFIX)
                                  or data.get("folder")):
            self.add_error("prune", "Removing pages is only for a single .zip of the whole book, with no folder: "
                                    "otherwise every page not in this upload would be removed.")
        if not self.errors:
            try:
                self.checked = check_upload(files, folder=data.get("folder", ""))
            except UploadError as exc:
                self.add_error("upload", exc.message)
        return data

    def save(self, commit: bool = True) -> IngestionJob:
        """The job, naming its book (an existing one, or the new slug and title); never saved here, whatever
        ``commit`` says: ``start_job`` saves it with its stored files."""
        job = super().save(commit=False)
        book, slug = self.cleaned_data.get("book"), self.cleaned_data.get("new_book_slug", "")
        job.book = book
        job.book_slug = book.slug if book else slug
        job.book_title = "" if book else (self.cleaned_data.get("new_book_title") or slug)
        return job
