"""SQLite storage through sqlite-utils: sessions, messages, runs, users, tokens, approvals, images, documents. No Flask here."""

from __future__ import annotations

from .approvals import ApprovalRepo, ImageRepo
from .agents import AgentRepo, ProfileRepo
from .code_access import CodeAccessRepo
from .database import Locked, open_database
from .documents import DocumentRepo
from .jobs import JobRepo
from .memories import MemoryRepo
from .messages import MessageRepo
from .runs import RunRepo
from .sessions import SessionRepo, new_id
from .tokens import TokenRepo
from .uploads import UploadRepo
from .users import SettingsRepo, UserRepo


class Store:
    """The repositories over one database file."""

    def __init__(self, path: str):
        self.path = path
        self.locked = Locked(open_database(path))
        self.sessions = SessionRepo(self.locked)
        self.messages = MessageRepo(self.locked)
        self.runs = RunRepo(self.locked)
        self.approvals = ApprovalRepo(self.locked)
        self.images = ImageRepo(self.locked)
        self.jobs = JobRepo(self.locked)
        self.profiles = ProfileRepo(self.locked)
        self.agents = AgentRepo(self.locked)
        self.users = UserRepo(self.locked)
        self.tokens = TokenRepo(self.locked)
        self.settings = SettingsRepo(self.locked)
        self.documents = DocumentRepo(self.locked)
        self.uploads = UploadRepo(self.locked)
        self.memories = MemoryRepo(self.locked)
        self.code_access = CodeAccessRepo(self.locked)

    @property
    def db(self):
        """The underlying sqlite-utils Database (hold ``locked.lock`` when using it)."""
        return self.locked.db


__all__ = ["Store", "new_id"]
