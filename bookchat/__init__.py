"""bookchat: a book's chatbot that answers only from the book and cites it.

Importing the package sets how the native thread pools of this process and its children wait, unless the
environment already says (this package is imported before numpy or the embedder in every entry point:
``manage.py``, the WSGI app, the test session). Both pools busy-wait for work by default, which costs a core
per idle thread whenever another process wants the CPU, as a web worker beside an ingest or the test suite
beside its background books does: beside a second busy process, spinning threads multiply the CPU that query
embeddings and the re-ranker's small matrix products cost (BENCHMARKS.md, "Speed", has the figures).

- ``OMP_WAIT_POLICY=PASSIVE``: the embedder's OpenMP threads sleep between parallel regions.
- ``OPENBLAS_NUM_THREADS=1``: numpy's matrix products run in the calling thread; they are a few hundred rows
  here, where a thread pool's hand-offs cost more than they save.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
