"""Staff uploads and publishes: ``intake`` (files checked and stored), ``tarball`` (a published ``.tar.gz``, checked
as it streams), ``forms`` (the upload form), ``jobs`` (a queued job run on a django-q2 worker, retried, noticed when
its worker died), ``sources`` (what an upload, a publish and a local job each do their own way), ``publishing`` (a
sync: a publish from CI) and ``admin`` (the upload pages of the admin, registered by ``ingestion.admin``).

It calls indexing (``ingestion.indexing``) and reading; ingestion's API (``ingestion.api``) and its entry points
import it.
"""
