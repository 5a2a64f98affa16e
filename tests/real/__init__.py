"""Tests against real peers (the Claude Code CLI installed by .ci/install-peers), fully offline."""
