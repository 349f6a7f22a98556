"""The landing page: which books are indexed and how big they are."""

from django.shortcuts import render

from ingestion.models import Book


def home(request):
    books = Book.objects.order_by("title").with_counts()
    return render(request, "bookchat/home.html", {"books": books})
