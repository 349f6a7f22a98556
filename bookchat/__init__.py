"""bookchat: a book's chatbot that answers only from the book and cites it.

Importing the package sets how the native thread pools of this process and its children wait, unless the
environment already says (this package is imported before numpy or the embedder in every entry point:
``manage.py``, the WSGI app, the test session). Both pools busy-wait for work by default, which costs a core
per idle thread whenever another process wants the CPU, as a web worker beside an ingest or the test suite
beside its background books does. Measured on the 2-core machine with a second busy process (BENCHMARKS.md,
Speed): 100 query embeddings took 36 s of CPU with OpenMP's spinning threads and 2.4 s with sleeping ones,
2,000 small re-ranking matrix products 11.8 s with OpenBLAS's threads and 1.8 s in the calling thread.

- ``OMP_WAIT_POLICY=PASSIVE``: the embedder's OpenMP threads sleep between parallel regions.
- ``OPENBLAS_NUM_THREADS=1``: numpy's matrix products run in the calling thread; they are a few hundred rows
  here, where a thread pool's hand-offs cost more than they save.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
