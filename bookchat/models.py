"""Django looks for the ``bookchat`` app's models here; they live in the base (``bookchat.base.models``), where the
apps below the project may import them."""

from bookchat.base.models import StaffCommand, TaskWorker

__all__ = ["StaffCommand", "TaskWorker"]
