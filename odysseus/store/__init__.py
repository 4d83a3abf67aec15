"""SQLite storage through sqlite-utils.

Sessions, messages, runs, users, tokens, approvals, images, documents. No Flask here.
"""

from __future__ import annotations

import os

from .approvals import ApprovalRepo, ImageRepo
from .branches import BranchRepo
from .agents import AgentRepo, ProfileRepo
from .code_access import CodeAccessRepo
from .database import Locked, open_database
from .documents import DocumentRepo
from .folders import FolderRepo
from .jobs import JobRepo
from .mcp_servers import McpServerRepo
from .memories import MemoryRepo
from .messages import MessageRepo
from .openai_responses import OpenAIResponseRepo
from .prompts import PromptRepo
from .ratings import RatingRepo
from .provider_connections import ProviderConnectionRepo
from .research import ResearchRepo
from .runs import RunRepo
from .search import SearchRepo
from .sessions import SessionRepo, new_id
from .shares import ShareRepo
from .sign_ins import SignInRepo
from .tokens import TokenRepo
from .uploads import UploadRepo
from .user_admin import UserAdminRepo
from .user_settings import UserSettingsRepo
from .users import SettingsRepo, UserRepo
from .workflows import WorkflowRepo


def database_path(config) -> str:
    """Where the SQLite file lives (``DATABASE`` overrides ``DATA_DIR``/odysseus.db)."""
    return config.get("DATABASE") or os.path.join(config["DATA_DIR"], "odysseus.db")


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
        self.sign_ins = SignInRepo(self.locked)
        self.settings = SettingsRepo(self.locked)
        self.documents = DocumentRepo(self.locked)
        self.uploads = UploadRepo(self.locked)
        self.memories = MemoryRepo(self.locked)
        self.research = ResearchRepo(self.locked)
        self.workflows = WorkflowRepo(self.locked)  # Agent Alloy
        self.search = SearchRepo(self.locked)  # m111_page: FTS5 over message text
        self.user_settings = UserSettingsRepo(self.locked)  # m111_page: per-user settings
        self.user_admin = UserAdminRepo(self.locked)  # m111_page: admin flag, disabled accounts
        self.code_access = CodeAccessRepo(self.locked)  # m112: who may use the code tools
        self.branches = BranchRepo(self.locked)  # m120: alternatives and the selected branch
        self.provider_connections = ProviderConnectionRepo(self.locked)  # m130: the admin's providers
        self.openai_responses = OpenAIResponseRepo(self.locked)  # m220: the /v1 API's response heads
        self.prompts = PromptRepo(self.locked)  # m308: the prompt library (/ commands)
        self.ratings = RatingRepo(self.locked)  # m310: ratings of replies
        self.folders = FolderRepo(self.locked)  # m307: chat folders (sessions carry folder_id, pinned, archived)
        self.shares = ShareRepo(self.locked)  # m309: share links (a chat's snapshot behind a token)
        self.mcp_servers = McpServerRepo(self.locked)  # m311: the admin's MCP servers

    def close(self) -> None:
        """Close the connection (under the lock, so no statement of another thread is cut in half)."""
        with self.locked.lock:
            self.locked.db.conn.close()
        self.code_access = CodeAccessRepo(self.locked)

    @property
    def db(self):
        """The underlying sqlite-utils Database (hold ``locked.lock`` when using it)."""
        return self.locked.db


__all__ = ["Store", "new_id"]
