"""Measuring answer quality: ``evaluation`` (a question set through the same pipeline the API uses),
``comparison`` (two settings judged in one run) and ``plots`` (the reliability and risk–coverage figures).

It calls the pipeline and the contract (``chat.channels.serializers``) as a client would; ``manage.py evaluate``
and ``make bench`` are its entry points.
"""
