"""Who may read what through the Slack bot: Slack users and channels mapped to access groups.

    users:            # direct messages: the user's own groups
      U024BE7LH: [security]
    channels:         # a channel: the channel's groups, whoever asks, since all its members
      C0SECURITY: [security]    # read the answer

An answer in a channel is read by everyone in it, so a channel gets only the groups given to
the channel, never those of the person who asked. Anyone or anything not listed sees public
documents only.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

Groups = list[str]


class SlackAccessError(ValueError):
    """The access file cannot be read or is malformed; the message says which."""


class SlackAccess(BaseModel):
    users: dict[str, Groups] = Field(default_factory=dict)
    channels: dict[str, Groups] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> SlackAccess:
        """The map in `path`; without a file, everyone sees public documents only."""
        if path is None:
            return cls()
        try:
            return cls.model_validate(yaml.safe_load(path.read_text()) or {})
        except OSError as error:
            raise SlackAccessError(f"cannot read Slack access file {path}: {error}") from error
        except (yaml.YAMLError, ValidationError) as error:
            raise SlackAccessError(f"Slack access file {path} is malformed: {error}") from error

    def groups_for(self, user: str, channel: str, direct: bool) -> tuple[str, ...]:
        """The groups an answer to `user` in `channel` may draw on."""
        return tuple(self.users.get(user, []) if direct else self.channels.get(channel, []))
