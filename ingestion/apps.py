from django.apps import AppConfig


class IngestionConfig(AppConfig):
    name = "ingestion"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from ingestion.indexing import qdrant, vector_index
        from ingestion.models import Book

        # A book deleted anywhere (the admin, a shell) leaves the Qdrant mirror too.
        post_delete.connect(qdrant.book_deleted, sender=Book, dispatch_uid="qdrant.book_deleted")
        post_delete.connect(vector_index.book_deleted, sender=Book, dispatch_uid="vector_index.book_deleted")
